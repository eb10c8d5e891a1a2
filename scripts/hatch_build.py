"""Hatch build hook: compiles the project's C sources into the shared libraries its modules load
with ctypes (`tokenmill.native`; no Python API: any C compiler, `CC` or cc).

Editable installs (`uv sync`) leave the library beside its source; wheels include it. It is
written under another name and renamed: processes that loaded the previous one keep theirs.
"""

import os
import shlex
import subprocess
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# source -> library. Not a name Python's import system takes for an extension module ("*.so"):
# the package's modules are walked (tests/test_bad_files.py) and a library is none.
LIBRARIES = {
    "tokenmill/text/word_scan.c": "tokenmill/text/libword_scan.so.1",
    "tokenmill/storage/spans.c": "tokenmill/storage/libspans.so.1",
    "tokenmill/text/ngrams.c": "tokenmill/text/libngrams.so.1",
    "tokenmill/crawl/html_words.c": "tokenmill/crawl/libhtml_words.so.1",
}
# The Dagster layer's top-level folders of a checkout, installed inside the package (an editable
# install finds them in the checkout: tokenmill/__init__.py).
DAGSTER_LAYER = ("resources", "data_assets", "sensors")


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        for source, library in LIBRARIES.items():
            self._compile(os.path.join(self.root, source), os.path.join(self.root, library))
            if version != "editable":
                build_data["force_include"][os.path.join(self.root, library)] = library
        if version != "editable":
            for folder in DAGSTER_LAYER:
                for directory, subdirectories, files in os.walk(os.path.join(self.root, folder)):
                    subdirectories[:] = [d for d in subdirectories if d != "__pycache__"]
                    for name in files:
                        if not name.endswith(".pyc"):
                            source = os.path.join(directory, name)
                            target = os.path.relpath(source, self.root)
                            build_data["force_include"][source] = f"tokenmill/{target}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def _compile(self, source: str, library: str) -> None:
        compiler = shlex.split(os.environ.get("CC", "cc"))
        handle, partial = tempfile.mkstemp(dir=os.path.dirname(library), suffix=".partial")
        os.close(handle)
        try:
            command = [*compiler, "-O2", "-shared", "-fPIC", "-o", partial, source]
            subprocess.run(command, check=True)
            os.replace(partial, library)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
