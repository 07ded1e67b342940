"""The words figures write (axis titles, hovers, legends): each viz module keeps them in a frozen dataclass of
English defaults, and pages pass it translated (app_pages.frame.i18n.translated). viz/ never imports gettext."""
from __future__ import annotations


def N_(message: str) -> str:
    """Marks an English default for the message catalog (the pages translate it)."""
    return message


def fill(template: str, **values) -> str:
    """template with each {name} replaced by its value; plotly's %{...} placeholders are left as they are."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", str(value))
    return template
