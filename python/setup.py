# Records, at build time, the repository this package was built from, so that the
# installed package finds that checkout's build/libgradprec.so (gradprec/_lib.py).
import os

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithOrigin(build_py):
    def run(self):
        super().run()
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        target = os.path.join(self.build_lib, "gradprec", "_origin.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write("# Written by setup.py at build time: the checkout this package came from.\n")
            f.write("REPO = %r\n" % repo)


setup(cmdclass={"build_py": BuildPyWithOrigin})
