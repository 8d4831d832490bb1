"""Paths the evaluator derives from where the package lies (kernelsmith/evaluate/sandboxing/): the folder
a judge or sandbox imports kernelsmith from, the folders a sandboxed uid must read, the folders `doctor`
tries to write. Each names the package folder, whatever subpackage the module that derives it sits in."""

from __future__ import annotations

import os
from pathlib import Path

import kernelsmith
from kernelsmith.evaluate.sandboxing import containment, doctor, process

PKG = Path(kernelsmith.__file__).resolve().parent


def test_a_child_imports_the_package_from_the_folder_that_holds_it():
    root = process.scrubbed_env()["PYTHONPATH"].split(os.pathsep)[0]
    assert Path(root) == PKG.parent and (Path(root) / "kernelsmith" / "__init__.py").is_file()


def test_a_sandboxed_uid_is_checked_for_reading_the_package_folder():
    assert str(PKG) in containment._environment_dirs()


def test_doctor_tries_to_write_the_package_and_its_evaluate_folder():
    targets = doctor._targets()
    assert str(PKG) in targets and str(PKG / "evaluate") in targets
