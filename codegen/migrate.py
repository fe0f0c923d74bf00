"""``mcpbind migrate``: a libcst codemod that moves user code from one revision's bindings to another's.

It is driven by the diff IR (``codegen.diff.compare``), the same one ``mcpbind diff`` prints, so
what it rewrites or marks is exactly what the diff reports:

- imports of revision A's package (``mcpbind.v2025_11_25``, its submodules, ``from mcpbind import
  v2025_11_25``) become imports of B's, and a dated revision string equal to A becomes B;
- a type B renamed (``type_renamed``) is renamed where the code names it;
- each use of a type, field or method that B removed or changed in a breaking way gets a comment
  above its statement naming the change (kind and path) and the ``docs/changes/`` file of the
  consecutive pair where it happened.

Uses are found by name, without type inference: a type is used where the code names it through
A's package; a field where it is a keyword of a call to such a type, or an attribute read whose
name is a changed field of a type the file names; a method where a string literal equals its
name. Everything else in the file (formatting, comments) is left exactly as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from .diff import Change, Diff, compare
from .ir import ObjectDef, Revision
from .paths import package_name
from .pin import pins

MARK = "# mcpbind migrate:"
_FIELD_PATH = re.compile(r'([A-Za-z_][\w]*)(?:\.([A-Za-z_$][\w$]*)|\[("(?:[^"\\]|\\.)*")\])')
_DATED = re.compile(r"\d{4}-\d{2}-\d{2}")


class MigrateError(Exception):
    """A file could not be read or parsed; nothing was written."""


@dataclass(frozen=True)
class Mark:
    kind: str
    path: str
    doc: str  # the docs/changes/ file of the consecutive pair where the change happened
    to: str | None = None  # where a moved field now lives

    def comment(self) -> str:
        where = f" -> {self.to}" if self.to else ""
        return f"{MARK} {self.kind} {self.path}{where} (docs/changes/{self.doc})"


@dataclass
class Plan:
    """What the diff from A to B means for code: renames and the marks per type, field and method."""

    a: str
    b: str
    renames: dict[str, str] = field(default_factory=dict)
    types: dict[str, list[Mark]] = field(default_factory=dict)
    # type -> Python attribute name -> marks for using that field
    fields: dict[str, dict[str, list[Mark]]] = field(default_factory=dict)
    # type -> (Python attribute name, mark) for fields a call must now pass
    required: dict[str, list[tuple[str, Mark]]] = field(default_factory=dict)
    methods: dict[str, list[Mark]] = field(default_factory=dict)

    @property
    def module_a(self) -> str:
        return package_name(self.a)

    @property
    def module_b(self) -> str:
        return package_name(self.b)


def _field_py(rev: Revision, owner: str, wire: str) -> str | None:
    d = rev.definitions.get(owner)
    f = d.field(wire) if isinstance(d, ObjectDef) else None
    return f.py if f is not None else None


def _split(path: str) -> tuple[str, str] | None:
    m = _FIELD_PATH.fullmatch(path)
    if not m:
        return None
    import json

    return m.group(1), m.group(2) or json.loads(m.group(3))


def _where(changes: list[tuple[str, Diff]], c: Change, fallback: str) -> str:
    """The consecutive pair whose diff has a change at the same path (the first one, in order)."""
    for doc, d in changes:
        if any(x.path == c.path for x in d.changes):
            return doc
    return fallback


def plan(a: str, b: str, build: dict[str, Revision] | None = None) -> Plan:
    """The codemod's plan for moving code from revision ``a`` to ``b``, read off ``compare(a, b)``
    on the committed digests (as ``mcpbind diff`` does: no schema needed)."""
    from .digest import read as build_ir

    order = [p.revision for p in pins()]
    irs = dict(build or {})

    def ir(r: str) -> Revision:
        if r not in irs:
            irs[r] = build_ir(r)
        return irs[r]

    lo, hi = sorted((order.index(a), order.index(b)))
    steps = [
        (f"{x}__{y}.md", compare(ir(x), ir(y)) if (x, y) != (a, b) else None)
        for x, y in zip(order[lo:hi], order[lo + 1 : hi + 1], strict=True)
    ]
    whole = compare(ir(a), ir(b))
    consecutive = [(doc, d if d is not None else whole) for doc, d in steps]
    fallback = consecutive[-1][0] if consecutive else f"{a}__{b}.md"
    p = Plan(a, b)
    for c in whole.changes:
        if c.kind == "type_renamed" and c.before and c.after:
            p.renames[c.before] = c.after
            continue
        if c.breaking is None:
            continue
        mark = Mark(
            c.kind, c.path, _where(consecutive, c, fallback), c.after if c.kind == "moved" else None
        )
        if c.section == "methods":
            p.methods.setdefault(c.path, []).append(mark)
            continue
        if c.section in ("types", "errors"):
            p.types.setdefault(c.path, []).append(mark)
            continue
        # A capability or a move is named by its side; the field that carried it is its `before`.
        split = _split(
            c.before if c.kind in ("capability_removed", "moved") and c.before else c.path
        )
        if split is None:
            continue  # the dialect: no code names it
        owner, wire = split
        newly_required = c.kind == "field_added" or (
            c.kind == "field_required_changed" and c.after == "required"
        )
        if newly_required:
            py = _field_py(ir(b), owner, wire)
            if py is not None:
                p.required.setdefault(owner, []).append((py, mark))
        else:
            py = _field_py(ir(a), owner, wire)
            if py is not None:
                p.fields.setdefault(owner, {}).setdefault(py, []).append(mark)
    return p


# -- the transformer -----------------------------------------------------------------------------------


def _dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


def _dotted_expr(name: str) -> cst.Attribute | cst.Name:
    parts = name.split(".")
    expr: cst.Attribute | cst.Name = cst.Name(parts[0])
    for part in parts[1:]:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr


@dataclass
class Finding:
    line: int
    text: str
    mark: bool = False  # a comment added for the user to act on, not a rewrite


class _Codemod(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (ParentNodeProvider, PositionProvider)

    def __init__(self, p: Plan) -> None:
        super().__init__()
        self.p = p
        self.pkg_a = f"mcpbind.{p.module_a}"
        self.pkg_b = f"mcpbind.{p.module_b}"
        self.local_types: dict[str, str] = {}  # local name -> A type it is bound to
        self.module_aliases: set[str] = set()  # local names bound to A's package (or a submodule)
        self.renamed_locals: dict[str, str] = {}  # local names that change with a type rename
        self.referenced: set[str] = set()  # A types the file names
        self.stack: list[list[tuple[Mark, int]]] = (
            []
        )  # per open statement: its marks and their lines
        self.findings: list[Finding] = []

    # -- bookkeeping --

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    def _note(self, node: cst.CSTNode, text: str, mark: bool = False) -> None:
        self.findings.append(Finding(self._line(node), text, mark))

    def _mark(self, node: cst.CSTNode, marks: Iterable[Mark]) -> None:
        for m in marks:
            if self.stack and all(m != seen for seen, _ in self.stack[-1]):
                self.stack[-1].append((m, self._line(node)))

    def _use_type(self, node: cst.CSTNode, name: str) -> None:
        self.referenced.add(name)
        self._mark(node, self.p.types.get(name, ()))

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            self.stack.append([])
        return super().on_visit(node)

    def on_leave(  # type: ignore[override]  # libcst types this generically per node class
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        result = super().on_leave(original_node, updated_node)
        if isinstance(original_node, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            marks = self.stack.pop()
            if marks and isinstance(result, cst.SimpleStatementLine | cst.BaseCompoundStatement):
                # A use already marked (a second run) keeps its one comment.
                have = {line.comment.value for line in result.leading_lines if line.comment}
                new = []
                for m, line in marks:
                    if m.comment() not in have:
                        new.append(cst.EmptyLine(comment=cst.Comment(m.comment())))
                        self.findings.append(
                            Finding(line, m.comment().removeprefix(MARK + " "), mark=True)
                        )
                if new:
                    result = result.with_changes(leading_lines=[*result.leading_lines, *new])
        return result

    # -- imports --

    def _module(self, dotted: str) -> str | None:
        """B's module for a module of A's package, else None."""
        if dotted == self.pkg_a or dotted.startswith(self.pkg_a + "."):
            return self.pkg_b + dotted[len(self.pkg_a) :]
        return None

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False  # rewritten as a whole in leave_ImportFrom

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom:
        if updated_node.module is None or updated_node.relative:
            return updated_node
        dotted = _dotted(updated_node.module)
        if dotted is None:
            return updated_node
        target = self._module(dotted)
        if target is not None:
            self._note(original_node, f"import `{dotted}` -> `{target}`")
            updated_node = updated_node.with_changes(module=_dotted_expr(target))
            if isinstance(updated_node.names, cst.ImportStar):
                return updated_node
            names = []
            for alias in updated_node.names:
                name = _dotted(alias.name) or ""
                local = (
                    alias.asname.name.value
                    if alias.asname and isinstance(alias.asname.name, cst.Name)
                    else name
                )
                new = self.p.renames.get(name)
                if new is not None:
                    self._note(original_node, f"type_renamed `{name}` -> `{new}`")
                    alias = alias.with_changes(name=cst.Name(new))
                    if alias.asname is None:
                        self.renamed_locals[name] = new
                        local = new
                self.local_types[local] = name
                self._use_type(original_node, name)
                names.append(alias)
            return updated_node.with_changes(names=names)
        if dotted == "mcpbind" and not isinstance(updated_node.names, cst.ImportStar):
            names = []
            for alias in updated_node.names:
                if isinstance(alias.name, cst.Name) and alias.name.value == self.p.module_a:
                    self._note(original_node, f"import `{self.pkg_a}` -> `{self.pkg_b}`")
                    if alias.asname is None:
                        self.renamed_locals[self.p.module_a] = self.p.module_b
                        self.module_aliases.add(self.p.module_b)
                    elif isinstance(alias.asname.name, cst.Name):
                        self.module_aliases.add(alias.asname.name.value)
                    alias = alias.with_changes(name=cst.Name(self.p.module_b))
                names.append(alias)
            return updated_node.with_changes(names=names)
        return updated_node

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        names = []
        for alias in updated_node.names:
            dotted = _dotted(alias.name) or ""
            target = self._module(dotted)
            if target is not None:
                self._note(original_node, f"import `{dotted}` -> `{target}`")
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.module_aliases.add(alias.asname.name.value)
                alias = alias.with_changes(name=_dotted_expr(target))
            names.append(alias)
        return updated_node.with_changes(names=names)

    # -- uses --

    def _parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        try:
            return self.get_metadata(ParentNodeProvider, node)
        except KeyError:
            return None

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        parent = self._parent(original_node)
        if isinstance(parent, cst.Attribute) and parent.attr is original_node:
            return updated_node
        if isinstance(parent, cst.Arg) and parent.keyword is original_node:
            return updated_node
        if isinstance(parent, cst.FunctionDef | cst.ClassDef | cst.Param):
            return updated_node
        name = original_node.value
        if name in self.local_types:
            self._use_type(original_node, self.local_types[name])
        if name in self.renamed_locals:
            return updated_node.with_changes(value=self.renamed_locals[name])
        return updated_node

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        head = _dotted(original_node.value)
        attr = original_node.attr.value
        if head is not None and self._module(head) is not None:
            # mcpbind.v2025_11_25.X spelled out in full
            self._note(original_node, f"`{head}` -> `{self._module(head)}`")
            updated_node = updated_node.with_changes(value=_dotted_expr(self._module(head) or head))
            head = self.p.module_b  # the value is now B's package
        if head is not None and (head in self.module_aliases or self._module(head) is not None):
            self._use_type(original_node, attr)
            new = self.p.renames.get(attr)
            if new is not None:
                self._note(original_node, f"type_renamed `{attr}` -> `{new}`")
                return updated_node.with_changes(attr=cst.Name(new))
            return updated_node
        for owner in self.referenced:
            self._mark(original_node, self.p.fields.get(owner, {}).get(attr, ()))
        return updated_node

    def _called_type(self, func: cst.BaseExpression) -> str | None:
        if isinstance(func, cst.Name):
            return self.local_types.get(func.value)
        if isinstance(func, cst.Attribute):
            head = _dotted(func.value)
            if head is not None and (head in self.module_aliases or self._module(head) is not None):
                return func.attr.value
        return None

    def visit_Call(self, node: cst.Call) -> None:
        owner = self._called_type(node.func)
        if owner is None:
            return
        given = {arg.keyword.value for arg in node.args if arg.keyword is not None}
        fields = self.p.fields.get(owner, {})
        for name in sorted(given):
            self._mark(node, fields.get(name, ()))
        spread = any(arg.star for arg in node.args)  # `T(**kwargs)` may pass anything
        if not spread:
            self._mark(node, [m for py, m in self.p.required.get(owner, ()) if py not in given])

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        value = original_node.evaluated_value
        if not isinstance(value, str):
            return updated_node
        self._mark(original_node, self.p.methods.get(value, ()))
        if value == self.p.a and _DATED.fullmatch(value) and _DATED.fullmatch(self.p.b):
            self._note(original_node, f'"{self.p.a}" -> "{self.p.b}"')
            return updated_node.with_changes(value=updated_node.value.replace(self.p.a, self.p.b))
        return updated_node


# -- files and the report -----------------------------------------------------------------------------


@dataclass
class FileResult:
    path: Path
    before: str
    after: str
    findings: list[Finding]

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class Report:
    a: str
    b: str
    files: list[FileResult]

    @property
    def changed(self) -> bool:
        return any(f.changed for f in self.files)

    def summary(self) -> str:
        changed = [f for f in self.files if f.changed]
        marks = sum(1 for f in self.files for x in f.findings if x.mark)
        return (
            f"{len(changed)} of {len(self.files)} file(s) changed from {self.a} to {self.b}; "
            f"{marks} use(s) marked with `{MARK}` comments"
        )

    def markdown(self) -> str:
        """What migrating would do, per file and line (``--check``)."""
        out = [
            f"# mcpbind migrate {self.a} -> {self.b}\n\n",
            self.summary().replace("changed", "would change", 1) + "\n",
        ]
        for f in self.files:
            if not f.changed:
                continue
            out.append(f"\n## {f.path}\n\n| line | change |\n| --- | --- |\n")
            for x in sorted(f.findings, key=lambda x: x.line):
                out.append(f"| {x.line} | {x.text.replace('|', chr(92) + '|')} |\n")
        return "".join(out)


def python_files(targets: Sequence[Path]) -> list[Path]:
    """The ``.py`` files named or found under the directories named, skipping hidden and venv folders."""
    found: list[Path] = []
    for t in targets:
        if t.is_dir():
            found += sorted(
                f
                for f in t.rglob("*.py")
                if not any(
                    part.startswith(".") or part in ("__pycache__", "node_modules")
                    for part in f.relative_to(t).parts[:-1]
                )
            )
        else:
            found.append(t)
    return found


def migrate_source(source: str, p: Plan) -> tuple[str, list[Finding]]:
    """``source`` moved from ``p.a`` to ``p.b`` and what was done to it (raises ``cst.ParserSyntaxError``)."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    codemod = _Codemod(p)
    return wrapper.visit(codemod).code, codemod.findings


def migrate(a: str, b: str, targets: Sequence[Path], write: bool = True) -> Report:
    """Move every Python file under ``targets`` from revision ``a`` to ``b``; write only when ``write``."""
    p = plan(a, b)
    results: list[FileResult] = []
    for path in python_files(targets):
        try:
            before = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MigrateError(f"cannot read {path}: {exc}") from exc
        try:
            after, findings = migrate_source(before, p)
        except cst.ParserSyntaxError as exc:
            raise MigrateError(f"{path}:{exc.raw_line}: cannot parse: {exc.message}") from exc
        results.append(FileResult(path, before, after, findings))
    if write:
        for r in results:
            if r.changed:
                r.path.write_text(r.after, encoding="utf-8")
    return Report(a, b, results)
