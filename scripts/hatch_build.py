"""Hatch build hook: compiles the project's C sources into the shared libraries their Python
modules load with ctypes (no Python API: any C compiler, `CC` or cc): the word scanner
(tokenmill/filters/word_scan.c) and the span gather (tokenmill/spans.c).

Editable installs (`uv sync`) leave each library beside its source; wheels include them. Each is
written under another name and renamed: processes that loaded the previous one keep theirs.
"""

import os
import shlex
import subprocess
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Source -> library. Not names Python's import system takes for an extension module ("*.so"):
# the package's modules are walked (tests/test_bad_files.py) and they are none.
LIBRARIES = {
    "tokenmill/filters/word_scan.c": "tokenmill/filters/libword_scan.so.1",
    "tokenmill/spans.c": "tokenmill/libspans.so.1",
}


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        for source, library in LIBRARIES.items():
            self._compile(*(os.path.join(self.root, path) for path in (source, library)))
            if version != "editable":
                build_data["force_include"][os.path.join(self.root, library)] = library
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    @staticmethod
    def _compile(source: str, library: str) -> None:
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
