"""tokenmill: raw web crawls in, deduplicated and tokenized LLM training shards out.

The processing core lives in this package's subpackages (storage, crawl, text, filters,
classifiers, dedup, tokens, release, runtime, stages, reports); the Dagster layer in
``tokenmill.resources``, ``tokenmill.data_assets`` and ``tokenmill.sensors``, tied together by
``tokenmill.definitions``.
"""

import importlib.util
import sys
from pathlib import Path

# The Dagster layer's folders sit at the top of a source checkout, beside this package; a wheel
# installs them inside it (scripts/hatch_build.py). Either way they are imported under this
# package's name, so that an installed tokenmill adds no generic top-level names.
DAGSTER_LAYER = ("resources", "data_assets", "sensors")
_CHECKOUT = Path(__file__).resolve().parent.parent
# The project folder: the checkout (its lake/, .dagster_home/ and tokenmill.yaml by default).
PROJECT_DIR = _CHECKOUT


class _CheckoutLayerFinder:
    @staticmethod
    def find_spec(name: str, path=None, target=None):
        package, _, leaf = name.partition(".")
        folder = _CHECKOUT / leaf
        if package != __name__ or leaf not in DAGSTER_LAYER:
            return None
        if not (folder / "__init__.py").is_file():
            return None
        return importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


_installed_inside = (Path(__file__).parent / "data_assets").is_dir()


def layer_folder(name: str) -> Path:
    """Where a folder of the Dagster layer is, in a checkout or installed (without importing it)."""
    return Path(__file__).resolve().parent / name if _installed_inside else _CHECKOUT / name


if not _installed_inside and _CheckoutLayerFinder not in sys.meta_path:
    sys.meta_path.append(_CheckoutLayerFinder)
