"""Reading a spec's text as untrusted input: a hardened YAML loader and a JSON reader, both of
which record where every value is written.

A spec comes from outside (a colleague, an e-mail, a repository), so its text is parsed with
limits that hold before any deep or expensive work is done:

- YAML aliases may add at most :data:`MAX_ALIAS_NODES` nodes in all, counted as if every alias
  were written out (a 3 KB "billion laughs" file would expand to a billion nodes); an alias
  inside the node it refers to (a self-containing structure) is refused;
- merge keys (``<<: *base``) are refused: each field is written once, where it applies;
- a key may appear only once in a mapping (YAML and JSON parsers silently keep the last one);
- nesting deeper than :data:`MAX_DEPTH` is refused while composing, before Python's recursion
  limit is near (a spec needs about 8 levels);
- YAML dates stay strings (the schema expects ISO date strings); no tag builds Python objects
  (it is a ``yaml.SafeLoader``).

Both readers return the document and :class:`Marks`, which maps a JSON path such as
``acceptance[2].threshold`` (as the validators report it) to the line and column of the text
where it is written. A refusal is a :class:`SpecTextError` carrying one ``path: message`` problem
and its (line, column); lines and columns count from 1.
"""
from __future__ import annotations

import bisect
import json
import re
from typing import Any, Callable

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "Marks", "SpecTextError", "load_json", "load_yaml"]

MAX_DEPTH = 32  # nesting levels (the root mapping is level 1, its values level 2, ...)
MAX_ALIAS_NODES = 10_000  # nodes that all aliases together may add when written out

Location = tuple[int, int]  # (line, column), both from 1


class SpecTextError(ValueError):
    """A spec text refused while reading it: one ``path: message`` problem at (line, column)."""

    def __init__(self, problem: str, location: Location | None):
        self.problem = problem
        self.location = location
        where = f"line {location[0]}, column {location[1]}: " if location else ""
        super().__init__(where + problem)


class Marks:
    """Where each value of a document is written: JSON path (tuple of keys and indices) -> (line, column).

    For a mapping entry this is its key when the value is a block (an indented mapping or list
    below the key), else the value itself; for a list item, the item. Inside an alias, the
    location is the anchored original's (the alias itself is marked where it is written).
    ``fill(marks)``, when given, records the locations on first use (JSON: only on an error).
    """

    def __init__(self, fill: Callable[["Marks"], None] | None = None) -> None:
        self.table: dict[tuple, Location] = {}
        self.children: dict[tuple, list] = {}
        self._fill = fill

    def _filled(self) -> "Marks":
        if self._fill is not None:
            fill, self._fill = self._fill, None
            fill(self)
        return self

    def add(self, path: tuple, location: Location) -> None:
        self.table.setdefault(path, location)
        if path:
            self.children.setdefault(path[:-1], []).append(path[-1])

    def at(self, path: tuple) -> Location | None:
        return self._filled().table.get(path)

    def _tokens(self, path: tuple) -> dict[str, Any]:
        """The children of ``path`` by the text they add to a JSON path (``[3]``, ``.name``)."""
        cache = self.__dict__.setdefault("_token_cache", {})
        if path not in cache:
            tokens: dict[str, Any] = {}
            for key in self.children.get(path, ()):
                if isinstance(key, int) and not isinstance(key, bool):
                    token = f"[{key}]"
                else:
                    token = ("." if path else "") + str(key)
                tokens.setdefault(token, key)
            cache[path] = tokens
        return cache[path]

    def resolve(self, text: str) -> tuple:
        """The longest known path that ``text`` (``a.b[3].c``) starts with; () when none. Each
        step looks up the candidate tokens (cut at each ``.`` or ``[`` of the rest, the longest
        first) in a table, so that a list of 100,000 items costs no more than a short one."""
        self._filled()
        path: tuple = ()
        rest = text
        while rest:
            tokens = self._tokens(path)
            cuts = [i for i in range(1, len(rest)) if rest[i] in ".["] + [len(rest)]
            found = next(((tokens[rest[:i]], i) for i in reversed(cuts) if rest[:i] in tokens), None)
            if found is None:
                break
            path += (found[0],)
            rest = rest[found[1]:]
        return path

    def locate(self, problem: str) -> Location | None:
        """The location of a ``path: message`` problem: its path, or the deepest part of it that
        is written in the text (a missing field is located at the mapping that lacks it)."""
        head = problem.split(": ", 1)[0].strip()
        if head in ("(file)", "(more)"):
            return None
        if head == "(root)":
            return self.at(())
        return self.at(self.resolve(head))


def _location(mark: yaml.Mark | None) -> Location | None:
    return (mark.line + 1, mark.column + 1) if mark is not None else None


def _key_text(key: Any) -> str:
    """A mapping key as the JSON text it becomes (1 and "1" are the same key in spec.json)."""
    return key if isinstance(key, str) else json.dumps(key)


# --------------------------------------------------------------------------- YAML


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader with the limits above; keeps dates as strings."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._alias_nodes = 0
        self._sizes: dict[int, int] = {}  # id(node) -> nodes when every alias inside is written out

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            event = self.get_event()
            where = _location(event.start_mark)
            target = self.anchors.get(event.anchor)
            if target is None:
                raise SpecTextError(f"(file): not valid YAML: found undefined alias {event.anchor!r}", where)
            size = self._sizes.get(id(target))
            if size is None:  # the anchored node is still being composed: it would contain itself
                raise SpecTextError(
                    f"(file): the alias *{event.anchor} is inside the node anchored &{event.anchor}; "
                    "a spec may not contain itself (rule: no recursive aliases)", where)
            self._alias_nodes += size
            if self._alias_nodes > MAX_ALIAS_NODES:
                raise SpecTextError(
                    f"(file): the alias *{event.anchor} brings the nodes added by aliases to "
                    f"{self._alias_nodes:,}, more than the limit of {MAX_ALIAS_NODES:,} (rule: aliases "
                    "may repeat only a small part of a spec; write the values out or use fewer aliases)",
                    where)
            # A shallow copy marked where the alias is written; its children are shared.
            if isinstance(target, ScalarNode):
                node = ScalarNode(target.tag, target.value, event.start_mark, event.end_mark, style=target.style)
            else:
                node = type(target)(target.tag, target.value, event.start_mark, event.end_mark,
                                    flow_style=target.flow_style)
            self._sizes[id(node)] = size
            return node
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise SpecTextError(
                    f"(file): nesting deeper than {MAX_DEPTH} levels (rule: a spec needs about 8 levels "
                    f"of mappings and lists; deeper nesting is refused)", _location(self.peek_event().start_mark))
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, SequenceNode):
            size = 1 + sum(self._sizes[id(c)] for c in node.value)
        elif isinstance(node, MappingNode):
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        else:
            size = 1
        self._sizes[id(node)] = size
        return node

    def construct_yaml_int(self, node: ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError as exc:  # e.g. more digits than Python converts (int_max_str_digits)
            raise SpecTextError(f"(file): not a usable integer: {str(exc).split(';')[0]}",
                                _location(node.start_mark)) from None


_SpecLoader.add_constructor("tag:yaml.org,2002:int", _SpecLoader.construct_yaml_int)
_SpecLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _walk(loader: _SpecLoader, node: Node, path: tuple, marks: Marks, location: Location) -> None:
    """Record every node's location; refuse duplicate and merge keys (depth <= MAX_DEPTH here)."""
    marks.add(path, location)
    if isinstance(node, MappingNode):
        seen: dict[str, Location] = {}
        seen_values: dict[Any, Location] = {}
        for key_node, value_node in node.value:
            key_at = _location(key_node.start_mark)
            if key_node.tag == _MERGE_TAG:
                raise SpecTextError(f"{_path_text(path)}: merge key '<<' (rule: a spec writes each field "
                                    "out where it applies; merge keys are not supported)", key_at)
            if not isinstance(key_node, ScalarNode):
                raise SpecTextError(f"{_path_text(path)}: a key must be a plain value, not a "
                                    f"{'list' if isinstance(key_node, SequenceNode) else 'mapping'}", key_at)
            key = loader.construct_object(key_node)
            first = seen.get(_key_text(key))
            if first is None:
                try:
                    first = seen_values.get(key)
                except TypeError:
                    first = None
            if first is not None:
                raise SpecTextError(
                    f"{_path_text(path + (key,))}: duplicate key {key!r}, first given at line {first[0]}, "
                    f"column {first[1]} (rule: each key may appear only once in a mapping; "
                    "a second one would silently replace the first)", key_at)
            seen[_key_text(key)] = key_at
            try:
                seen_values[key] = key_at
            except TypeError:
                pass
            block = isinstance(value_node, (MappingNode, SequenceNode)) and not value_node.flow_style \
                and value_node.start_mark.line != key_node.start_mark.line
            _walk(loader, value_node, path + (key,), marks,
                  key_at if block else _location(value_node.start_mark))
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _walk(loader, item, path + (i,), marks, _location(item.start_mark))


def _path_text(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) and not isinstance(part, bool) else ("." if out else "") + str(part)
    return out or "(root)"


def load_yaml(text: str) -> tuple[Any, Marks]:
    """Parse one YAML document with the limits of this module. Raises :class:`SpecTextError`."""
    try:
        loader = _SpecLoader(text)
    except yaml.reader.ReaderError as exc:   # a NUL or other control character, checked at once
        raise _reader_error(text, exc) from None
    try:
        node = loader.get_single_node()
        marks = Marks()
        if node is None:
            return None, marks
        _walk(loader, node, (), marks, _location(node.start_mark))
        return loader.construct_document(node), marks
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = "; ".join(str(s) for s in (exc.context, exc.problem) if s)
        raise SpecTextError(f"(file): not valid YAML: {what}", _location(mark)) from None
    except yaml.reader.ReaderError as exc:
        raise _reader_error(text, exc) from None
    except yaml.YAMLError as exc:
        raise SpecTextError(f"(file): not valid YAML: {exc}", None) from None
    finally:
        loader.dispose()


def _reader_error(text: str, exc: "yaml.reader.ReaderError") -> SpecTextError:
    """A character YAML does not allow in a document (NUL, other control characters): its line
    and column (the reader gives only an offset) and its code point, never a traceback."""
    position = max(0, min(int(getattr(exc, "position", 0) or 0), len(text)))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    char = exc.character   # the code point (an int; a str in some PyYAML versions)
    code = f"U+{ord(char) if isinstance(char, str) else int(char):04X}"
    return SpecTextError(f"(file): not valid YAML: the character {code} is not allowed in a YAML "
                         "document (rule: a spec is printable text; control characters such as NUL "
                         "are refused)", (line, column))


# --------------------------------------------------------------------------- JSON

_JSON_TOKEN = re.compile(r'[ \t\r\n]+|[{}\[\]:,]|"(?:[^"\\\x00-\x1f]|\\.)*"|[^ \t\r\n{}\[\]:,"]+')


class _Stop(Exception):
    """The JSON scanner met something that is not JSON: json.loads reports it."""


def _scan_json(text: str, marks: Marks) -> None:
    """Record the location of every value in ``marks``, refusing (SpecTextError) a duplicate key
    or nesting deeper than MAX_DEPTH where it is written; iterative, so any depth is safe.
    Raises _Stop at anything that is not JSON."""
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(offset: int) -> Location:
        line = bisect.bisect_right(line_starts, offset)
        return line, offset - line_starts[line - 1] + 1

    # frames: [kind ("{" or "["), path, state, key or index, key location, seen keys]
    stack: list[list] = []
    done = False
    pos = 0
    while pos < len(text):
        m = _JSON_TOKEN.match(text, pos)
        if m is None:
            raise _Stop
        tok, start, pos = m.group(), m.start(), m.end()
        if tok[0] in " \t\r\n":
            continue
        frame = stack[-1] if stack else None
        state = frame[2] if frame else ("end" if done else "value")
        if state == "key" or (state == "key_or_end" and tok != "}"):
            if tok[0] != '"':
                raise _Stop
            key = json.loads(tok)
            first = frame[5].get(key)
            if first is not None:
                raise SpecTextError(
                    f"{_path_text(frame[1] + (key,))}: duplicate key {key!r}, first given at line "
                    f"{first[0]}, column {first[1]} (rule: each key may appear only once in an object; "
                    "a second one would silently replace the first)", where(start))
            frame[5][key] = where(start)
            frame[3], frame[4], frame[2] = key, where(start), "colon"
        elif state == "colon":
            if tok != ":":
                raise _Stop
            frame[2] = "value"
        elif state in ("value", "value_or_end") and not (state == "value_or_end" and tok == "]"):
            if tok in ("}", "]", ":", ","):
                raise _Stop
            if frame is None:
                path, at = (), where(start)
            elif frame[0] == "{":
                path, at = frame[1] + (frame[3],), frame[4]
            else:
                path, at = frame[1] + (frame[3],), where(start)
            if len(stack) + 1 > MAX_DEPTH:
                raise SpecTextError(
                    f"(file): nesting deeper than {MAX_DEPTH} levels (rule: a spec needs about 8 levels "
                    f"of objects and arrays; deeper nesting is refused)", where(start))
            marks.add(path, at)
            if tok == "{":
                stack.append(["{", path, "key_or_end", None, None, {}])
            elif tok == "[":
                stack.append(["[", path, "value_or_end", 0, None, None])
            else:
                done = _after_value(stack)
        elif state in ("comma_or_end", "key_or_end", "value_or_end"):
            close = "}" if frame[0] == "{" else "]"
            if tok == close:
                stack.pop()
                done = _after_value(stack)
            elif tok == "," and state == "comma_or_end":
                if frame[0] == "{":
                    frame[2] = "key"
                else:
                    frame[3] += 1
                    frame[2] = "value"
            else:
                raise _Stop
        else:  # text after the document
            raise _Stop
    if stack or not done:
        raise _Stop


def _after_value(stack: list[list]) -> bool:
    """A value ended: the enclosing frame now expects a comma or its end. True at the top level."""
    if not stack:
        return True
    stack[-1][2] = "comma_or_end"
    return False


class _Duplicate(Exception):
    """json.loads met an object with a repeated key (the scanner says which and where)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate
    return out


def _depth(doc: Any) -> int:
    """Nesting depth of a parsed document (the root is level 1), without recursion."""
    deepest, todo = 0, [(doc, 1)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            break
        if isinstance(node, dict):
            todo.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            todo.extend((v, level + 1) for v in node)
    return deepest


def load_json(text: str) -> tuple[Any, Marks]:
    """Parse a JSON document with the limits of this module. Raises :class:`SpecTextError`.

    The C decoder parses; the (slower) scanner runs only to locate a refusal, or later, when a
    problem needs its line and column."""
    def refuse_where_written() -> None:
        try:
            _scan_json(text, Marks())  # raises SpecTextError at the duplicate key or the deep value
        except (_Stop, ValueError) as exc:
            if isinstance(exc, SpecTextError):
                raise
        raise SpecTextError("(file): not valid JSON: unexpected text (the structure could not be read)", None)

    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates)
    except (_Duplicate, RecursionError):
        refuse_where_written()
    except json.JSONDecodeError as exc:
        raise SpecTextError(f"(file): not valid JSON: {exc.msg}", (exc.lineno, exc.colno)) from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise SpecTextError(f"(file): not valid JSON: {str(exc).split(';')[0]}", None) from None
    if _depth(doc) > MAX_DEPTH:
        refuse_where_written()

    def fill(marks: Marks) -> None:
        try:
            _scan_json(text, marks)
        except (_Stop, ValueError):  # cannot happen for text json.loads accepted; locations stay partial
            pass

    return doc, Marks(fill)
