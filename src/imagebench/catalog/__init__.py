"""The catalog: where cases come from (docs/running.md, "Cases from anywhere").

:func:`build_catalog` gathers the built-in suite, the ``imagebench.cases`` entry points of
installed packages, ``--cases`` modules, skill bundles and the cases declared in the user's
fixture tree into one :class:`Catalog`, each case with its :class:`Source`; :func:`reopen` opens
the sources a run recorded (``run.json``'s ``sources``) again. :func:`tree_read` says which fixture
tree a case reads its pixels from.
"""

from imagebench.catalog.again import cases_of_run
from imagebench.catalog.load import build_catalog, module_source, open_source, reopen, user_tree
from imagebench.catalog.model import BUILTIN_NAME, ENTRY_POINT_GROUP, Catalog, CatalogError, Source
from imagebench.catalog.trees import TreeRead, packaged_tree, tree_read

__all__ = [
    "BUILTIN_NAME",
    "ENTRY_POINT_GROUP",
    "Catalog",
    "CatalogError",
    "Source",
    "TreeRead",
    "build_catalog",
    "cases_of_run",
    "module_source",
    "open_source",
    "packaged_tree",
    "reopen",
    "tree_read",
    "user_tree",
]
