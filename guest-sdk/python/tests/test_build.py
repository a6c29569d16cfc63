"""The build command's checks and the failure text: what componentize-py or
a bare traceback would bury is said plainly, with the fix or the line."""

import tempfile
import unittest
from pathlib import Path

from kubewasm_guest import build
from kubewasm_guest._export import _describe


class BuildChecksTest(unittest.TestCase):
    def module(self, source: str) -> Path:
        dir = Path(tempfile.mkdtemp())
        (dir / "someapp.py").write_text(source)
        return dir

    def test_a_missing_module_names_the_argument_to_pass(self):
        with self.assertRaisesRegex(build.BuildError, r"no module `nothere` in .*app.py -> app"):
            build.check_app("nothere", self.module(""))

    def test_a_file_name_is_refused_for_the_module_name(self):
        with self.assertRaisesRegex(build.BuildError, r"`someapp`, not `someapp.py`"):
            build.check_app("someapp.py", self.module(""))

    def test_an_app_without_plugin_says_what_to_write(self):
        dir = self.module("from kubewasm_guest import export\nplugin = None\n")
        with self.assertRaisesRegex(build.BuildError, r"defines no `Plugin`.*Plugin = export\(YourReconciler\(\)\)"):
            build.check_app("someapp", dir)


class FailureTextTest(unittest.TestCase):
    def test_a_failure_names_the_plugin_line_that_raised(self):
        def reconcile():
            raise KeyError("spec")

        try:
            reconcile()
        except KeyError as e:
            text = _describe(e)
        self.assertRegex(text, r"^KeyError: 'spec' \(at test_build\.py:\d+ in reconcile\)$")


if __name__ == "__main__":
    unittest.main()
