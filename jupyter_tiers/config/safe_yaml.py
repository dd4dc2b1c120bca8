"""Safe YAML for files other people may write: PyYAML's safe loader, refusing deep nesting and
alias expansion past a bound (a "billion laughs" file is a few lines long). Every problem is a
ConfigError naming the file and line."""

from __future__ import annotations

from typing import Any

from ..core.errors import ConfigError

MAX_YAML_DEPTH = 50
MAX_YAML_NODES = 200_000


def _yaml_loader(text: str) -> Any:
    """A safe YAML loader that also refuses deep nesting and alias expansion beyond
    MAX_YAML_DEPTH / MAX_YAML_NODES (a "billion laughs" file is a few lines long)."""
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            if self.depth > MAX_YAML_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {MAX_YAML_DEPTH} levels")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader(text)


def _expanded_size(root: Any) -> int:
    """Nodes of the document with every alias expanded (each shared node counted per use)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        value = node.value if isinstance(node.value, list) else []
        children = [c for item in value for c in (item if isinstance(item, tuple) else (item,))]
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        sizes[id(node)] = min(MAX_YAML_NODES + 1, 1 + sum(sizes.get(id(c), 1) for c in children))
    return sizes[id(root)]


def parse_yaml(text: str, source: str) -> Any:
    """The YAML document in ``text``; every problem is a ConfigError naming ``source``."""
    import yaml

    loader = None
    try:
        loader = _yaml_loader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_YAML_NODES:
            raise ConfigError(source, "", f"more than {MAX_YAML_NODES} values once aliases are "
                              "expanded; write the profiles out instead of nesting aliases")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(source, where, f"not valid YAML: {problem}") from None
    except RecursionError:
        raise ConfigError(source, "", "not valid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
