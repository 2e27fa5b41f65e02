"""The HTML reports' templates (report/templates/*.html), escaped by default."""

from jinja2 import Environment, PackageLoader, select_autoescape

TEMPLATES = Environment(loader=PackageLoader("perfline", "report/templates"), autoescape=select_autoescape(["html"]),
                        trim_blocks=True, lstrip_blocks=True)
