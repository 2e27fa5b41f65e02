"""`perfline serve`: the dashboard, server-rendered pages and a JSON API over the store."""
