"""README.html: the datasheet template of the context's edition (:mod:`.edition`) filled with
:func:`~.context.build_context`'s context."""
from __future__ import annotations

import re
from importlib import resources

from .edition import EDITION_STYLESHEETS, EDITION_TEMPLATES, LATEST_EDITION, stylesheet_name, template_name

__all__ = ["render_html", "read_resource", "check_templates"]


def read_resource(name: str) -> str:
    """A file of the ``dpbundle.templates`` package (template or stylesheet)."""
    return resources.files("dpbundle.templates").joinpath(name).read_text(encoding="utf-8")


def _nobreak_ids(text: str):
    """Escape ``text`` and keep each token with a digit in it (arXiv:2405.00267, 94-171, 10^-10)
    on one line, so that no identifier is broken at a line end."""
    from markupsafe import Markup, escape

    parts = re.split(r"(\S*\d\S*)", str(text))
    return Markup("").join(Markup('<span class="nowrap">') + escape(p) + Markup("</span>") if i % 2 else escape(p)
                           for i, p in enumerate(parts))


def render_html(context: dict) -> str:
    """The datasheet as one self-contained HTML page (CSS and SVG inline); deterministic."""
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters["nobreak_ids"] = _nobreak_ids
    edition = context.get("edition", LATEST_EDITION)
    template = env.from_string(read_resource(template_name(edition)))
    ctx = dict(context)
    ctx["css"] = Markup(read_resource(stylesheet_name(edition)))
    for key in [k for k in context if k.endswith("_chart")]:  # inline SVG built by charts.py
        ctx[key] = Markup(context[key])
    ctx["columns"] = [dict(c, chart=Markup(c["chart"])) for c in context["columns"]]
    return template.render(**ctx)


def check_templates() -> None:
    """Raise if a datasheet template (of any edition) or the stylesheet is missing or does not parse."""
    import jinja2

    for name in EDITION_TEMPLATES.values():
        jinja2.Environment(autoescape=True).parse(read_resource(name))
    for name in EDITION_STYLESHEETS.values():
        read_resource(name)
