"""One help style for every command, as in git or ripgrep: usage lines in capitals
(``dpbundle audit [OPTIONS] BUNDLE``, optional arguments in brackets), no type column for flags
(a flag takes no value, so Typer's ``<bool>`` misleads), examples as code blocks that keep their
line breaks (``docs/internals.md``: Help texts)."""
from __future__ import annotations

from typing import Any, Callable

import typer
from typer.core import TyperCommand

__all__ = ["StyledCommand", "add_command"]


class StyledCommand(TyperCommand):
    """A Typer command whose usage line and option table follow the project's style."""

    # Typer vendors its own click: parameters are told apart by their documented
    # ``param_type_name`` ("argument" / "option") rather than by class.

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for p in params:
            kind = getattr(p, "param_type_name", "")
            if kind == "option" and getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = ""  # a flag has no value to describe
            elif kind == "argument" and p.metavar is None:
                p.metavar = (p.name or "").upper()
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if getattr(p, "param_type_name", "") == "argument":
                name = p.metavar or (p.name or "").upper()
                name += "..." if p.nargs != 1 else ""
                pieces.append(name if p.required else f"[{name}]")
        return pieces


def add_command(app: typer.Typer, name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as command ``name`` of ``app`` in the project's help style."""
    app.command(name, cls=StyledCommand)(fn)
