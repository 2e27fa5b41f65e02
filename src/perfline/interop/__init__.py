"""Other tools' results in (`perfline import`), perfline's out (`perfline export`)."""
