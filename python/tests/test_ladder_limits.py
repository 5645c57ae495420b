"""The limits that keep the top of the ladder a set of lessons (CONTRIBUTING.md): each rung's code
differs from the rung before by about 350 lines at most, comments and blank lines left out; its
banner is at most 25 lines; its page at most about 350; no code comment names a device run; the
tracked tree stays small. CPU only: the files are read as text.

"The rung before" is the one before in the rung's own track: the backward rungs (those that
register Op::backward, 29 on) are compared with each other, 30 with 29, 31 with 30 and so on; the
first of them (29) starts its track, as rung 00 does, and has no diff limit. The serving track
(decode, 37 on: the forward rungs from the one whose banner says it is the first rung of the
serving track) is a track of its own the same way. Where a banner's "builds on: NN" names another
rung of the same track than the one before it in number (rung 41, the first of the last
mma.sync backward rungs, 41-45 and 54-55, builds on 32, not on the Hopper rung 36), that rung is the one
before."""
import difflib
import glob
import os
import re
import subprocess
import unittest

import _setup

KERNELS = os.path.join(_setup.REPO, "kernels")
PAGES = os.path.join(_setup.REPO, "docs", "kernels")

FIRST_SPLIT_RUNG = 22      # from here on, one idea a rung under these limits
MAX_CHANGED_LINES = 370    # "about 350": the rule's figure, with its small margin stated here
MAX_BANNER_LINES = 25
MAX_PAGE_LINES = 350
MAX_TREE_BYTES = 10 * 1024 * 1024  # a serving rung adds about 75 KB of code and 75 of docs


def backward_rungs():
    """The numbers of the backward track: the rungs whose registration says Op::backward (the
    mma.sync ones, FL_SM80_BACKWARD_RUNGS in CMakeLists.txt, and the Hopper ones after them)."""
    found = set()
    for folder in glob.glob(os.path.join(KERNELS, "[0-9][0-9]_*")):
        for path in glob.glob(os.path.join(folder, "*.cu")):
            with open(path, encoding="utf-8") as f:
                if re.search(r"\bop = Op::backward;", f.read()):
                    found.add(int(os.path.basename(folder)[:2]))
    return found


SERVING_MARKER = "the first rung of the serving track"


def serving_rungs():
    """The numbers of the serving track: the forward rungs numbered from the one whose banner
    (its opening lines, between the two rules) holds SERVING_MARKER on."""
    first = None
    for rung in rungs():
        for path in glob.glob(os.path.join(KERNELS, rung, "*.cu")):
            n = banner_lines(path)
            with open(path, encoding="utf-8") as f:
                banner = "".join(f.readlines()[:n or 0])
            if SERVING_MARKER in banner and first is None:
                first = int(rung[:2])
    if first is None:
        return set()
    backward = backward_rungs()
    return {int(r[:2]) for r in rungs() if int(r[:2]) >= first and int(r[:2]) not in backward}


def builds_on(rung):
    """The number the banner's "// builds on: NN" line names, or None."""
    for path in glob.glob(os.path.join(KERNELS, rung, "*.cu")):
        with open(path, encoding="utf-8") as f:
            m = re.search(r"^// builds on: (\d\d)\b", f.read(), re.M)
        if m:
            return int(m.group(1))
    return None


def track_of(number, backward, serving):
    return "backward" if number in backward else "serving" if number in serving else "forward"


def rungs():
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(KERNELS, "[0-9][0-9]_*"))
                  if glob.glob(os.path.join(p, "*.cu")))


def code_lines(rung):
    """The rung's code: its headers, then its .cu files, comments and blank lines left out."""
    folder = os.path.join(KERNELS, rung)
    lines = []
    for path in sorted(glob.glob(os.path.join(folder, "*.cuh"))) + \
            sorted(glob.glob(os.path.join(folder, "*.h"))) + \
            sorted(glob.glob(os.path.join(folder, "*.cu"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = re.sub(r"//.*$", "", line.rstrip("\n"))
                if line.strip():
                    lines.append(line)
    return lines


def changed_lines(a, b):
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum((i2 - i1) + (j2 - j1)
               for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")


def banner_lines(path):
    """Lines from the banner's opening rule to its closing one, both counted."""
    with open(path, encoding="utf-8") as f:
        text = f.read().splitlines()
    rules = [i for i, line in enumerate(text[:80]) if line.startswith("// ====")]
    return rules[1] - rules[0] + 1 if len(rules) >= 2 else None


class Limits(unittest.TestCase):
    def split_rungs(self):
        return [r for r in rungs() if int(r[:2]) >= FIRST_SPLIT_RUNG]

    def test_each_rung_changes_few_lines(self):
        backward, serving = backward_rungs(), serving_rungs()
        for track in ("forward", "backward", "serving"):
            names = [r for r in rungs() if track_of(int(r[:2]), backward, serving) == track]
            # The first rung of a track (00, 29, 37) has no rung before it: no limit.
            for before, rung in zip(names, names[1:]):
                if int(rung[:2]) < FIRST_SPLIT_RUNG:
                    continue
                named = builds_on(rung)
                if named is not None and int(before[:2]) != named:
                    before = next((r for r in names if int(r[:2]) == named), before)
                with self.subTest(rung=rung):
                    n = changed_lines(code_lines(before), code_lines(rung))
                    self.assertLessEqual(n, MAX_CHANGED_LINES, f"{before} -> {rung}: {n} lines")

    def test_the_backward_track_is_read(self):
        """The rungs the diff test splits the tracks by are found (else 29 would be held to the
        limit against 28, and 30 and 31 would go unchecked)."""
        self.assertEqual(backward_rungs() & {29, 30, 31}, {29, 30, 31})

    def test_the_serving_track_is_read(self):
        """Rung 37 (decode) starts the serving track and is no backward rung (else it would be
        held to the limit against rung 36), and no rung before it is in the track."""
        if not glob.glob(os.path.join(KERNELS, "37_*", "*.cu")):
            self.skipTest("no rung 37 in this tree")
        serving = serving_rungs()
        self.assertIn(37, serving)
        self.assertEqual(min(serving), 37)
        self.assertNotIn(37, backward_rungs())

    def test_a_rung_is_held_to_the_rung_it_builds_on(self):
        """Rung 41 builds on rung 32 (its banner says so), which is before it in the backward
        track; the Hopper rungs 33-36 come between them in number."""
        if not glob.glob(os.path.join(KERNELS, "41_*", "*.cu")):
            self.skipTest("no rung 41 in this tree")
        self.assertEqual(builds_on("41_bwd_lean_step"), 32)
        self.assertEqual(builds_on("30_bwd_trans"), 29)

    def test_the_diff_counts_what_changed(self):
        a = ["int a;", "int b;", "int c;"]
        self.assertEqual(changed_lines(a, a), 0)
        self.assertEqual(changed_lines(a, ["int a;", "int x;", "int c;"]), 2)

    def test_banners_are_short(self):
        for rung in self.split_rungs():
            for path in glob.glob(os.path.join(KERNELS, rung, "*.cu")):
                n = banner_lines(path)
                if n is None:
                    continue  # a second .cu of the rung, without a banner
                with self.subTest(file=path):
                    self.assertLessEqual(n, MAX_BANNER_LINES)
                    with open(path, encoding="utf-8") as f:
                        head = f.read()
                    self.assertRegex(head, r"// Kernel %s of \d\d — " % rung[:2])

    def test_no_code_comment_names_a_run(self):
        for path in glob.glob(os.path.join(KERNELS, "*", "*")):
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    comment = line.partition("//")[2]
                    with self.subTest(file=path, line=number):
                        self.assertIsNone(re.search(r"\b[Rr]uns? [0-9]{1,3}\b", comment), line)

    def test_pages_of_the_split_rungs_are_short(self):
        for rung in self.split_rungs():
            page = os.path.join(PAGES, rung + ".md")
            with self.subTest(page=page):
                self.assertTrue(os.path.exists(page))
                with open(page, encoding="utf-8") as f:
                    self.assertLessEqual(len(f.read().splitlines()), MAX_PAGE_LINES)

    def test_the_tracked_tree_is_small(self):
        try:
            out = subprocess.run(["git", "ls-files", "-z"], cwd=_setup.REPO, capture_output=True,
                                 check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            self.skipTest(f"git ls-files did not run here: {e}")
        paths = [os.path.join(_setup.REPO, p.decode()) for p in out.split(b"\0") if p]
        size = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
        self.assertLess(size, MAX_TREE_BYTES, f"{size} bytes tracked")


if __name__ == "__main__":
    unittest.main()
