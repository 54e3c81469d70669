"""Binder and Colab launch links of every chapter in the built HTML.

Each chapter notebook's page must link to Binder and to Colab for the repository, branch and
notebook path configured in _config.yml (`repository`), and that notebook must be a file that
reaches GitHub (present and not git-ignored). Reads the built HTML; needs no browser.
"""

from __future__ import annotations

import html as html_lib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from booktoc import toc_docnames

ROOT = Path(__file__).resolve().parents[2]




CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
CHAPTERS = [d for d in toc_docnames() if (ROOT / f"{d}.ipynb").is_file()]


def expected_links(docname: str) -> tuple[str, str]:
    repo = CONFIG["repository"]
    launch = CONFIG["launch_buttons"]
    org_repo = re.sub(r"^https://github\.com/", "", repo["url"].rstrip("/"))
    branch = repo.get("branch", "main")
    path = f"{(repo.get('path_to_book') or '').strip('/') + '/' if repo.get('path_to_book') else ''}{docname}.ipynb"
    ui = "lab/tree" if launch.get("notebook_interface") == "jupyterlab" else "tree"
    binder = f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{org_repo}/{branch}?urlpath={ui}/{path}"
    colab = f"{launch['colab_url'].rstrip('/')}/github/{org_repo}/blob/{branch}/{path}"
    return binder, colab


def test_there_are_chapters() -> None:
    assert len(CHAPTERS) >= 10, CHAPTERS


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_has_binder_and_colab_links(built_html: Path, docname: str) -> None:
    page = (built_html / f"{docname}.html").read_text(encoding="utf-8")
    hrefs = {html_lib.unescape(h) for h in re.findall(r'href="([^"]+)"', page)}
    binder, colab = expected_links(docname)
    assert binder in hrefs, f"{docname}: no Binder link {binder}; found {[h for h in hrefs if 'binder' in h]}"
    assert colab in hrefs, f"{docname}: no Colab link {colab}; found {[h for h in hrefs if 'colab' in h]}"
    assert f"{CONFIG['repository']['url'].rstrip('/')}" in hrefs, f"{docname}: no repository button"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_launched_notebook_reaches_github(docname: str) -> None:
    """The links name book/NN_name.ipynb on GitHub: the file exists and git does not ignore it."""
    path = ROOT / f"{docname}.ipynb"
    assert path.is_file()
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=ROOT, check=False)
    assert ignored.returncode == 1, f"{path.relative_to(ROOT)} is git-ignored: the launch links would 404"
