"""The README is a newcomer's page (issue 38): short, it names the article, gives the two commands and the core
path before anything else, numbers its page table 1..13 in order, and every fact it used to hold still lives in a
docs/ file it links. The teacher's guide names the article too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Written out here, not imported from the app's strings: the article's title as the article itself prints it.
ARTICLE = "实现教学版 PagedAttention：从 block table 读取历史 KV cache"
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_readme_is_at_most_1500_words_and_names_the_article():
    text = readme()
    assert len(text.split()) <= 1500, len(text.split())
    assert ARTICLE in text and "part 11" in text


def test_readme_gives_the_two_commands_then_start_here_before_the_page_table():
    """The test command stays `python -m pytest` (.ci/run calls it); "Start here" comes before the table."""
    text = readme()
    assert "streamlit run app.py" in text and "python -m pytest" in text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:3] == ["## Two commands", "## Start here: the core path", "## The pages"], headings
    path = "Home → 1 · Address translation → 2 · Gather & attend → 3 · Batch decode → 4 · Engine"
    assert path in text


def test_readme_page_table_numbers_what_it_lists_in_order():
    """Rows 1..13, none skipped (the guide is 8, listed after 7), each numbered as the app's navigation names it."""
    from ui.nav import EXERCISES_PAGE, PAGES, title

    rows = re.findall(r"^\| (\d+) · ([^|]+?) \|", readme(), flags=re.MULTILINE)
    assert [int(n) for n, _ in rows] == list(range(1, 14)), rows
    names = [f"{n} · {name}" for n, name in rows]
    assert names == [title(p, "en") for p in PAGES if p.url_path] + [title(EXERCISES_PAGE, "en")]


@pytest.mark.parametrize("doc", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_of_the_readme_and_docs_names_a_file_that_exists(doc):
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if "://" in target or target.startswith(("/", "mailto:")):
            continue  # an outside link, or a link into the app (the guide's share links)
        assert (doc.parent / target).exists(), (doc.name, target)


# Facts the README held before it became a newcomer's page, and the docs/ file each moved to.
MOVED = {
    "pages.md": ["quiz=1", "`step=` or `steps=`", "\"Export\" downloads the trace as JSON", "| 8 · Teacher's guide |",
                 "| 13 · Your turn |"],
    "classroom.md": ["Presenter mode", "PAGED_MAX_SESSIONS", "deploy/run.sh 4 8500", "hash … consistent",
                     "python deploy/session_memory.py", "PAGED_EXERCISES=DIR"],
    "cli.md": ["python -m paged generate", "python -m benchmarks kernels", "from paged.addressing import locate",
               "0.85 M-parameter Llama", "PAGED_MODEL_DIRS", "python -m paged.model.train"],
    "layout.md": ["tests/test_floors.py", "paged/__init__.py: the reading order", "PAGED_REQUIRE_VLLM=1",
                  "bash scripts/install_vllm.sh", "fonts-wqy-microhei", "-m article"],
}


@pytest.mark.parametrize("name", sorted(MOVED))
def test_what_left_the_readme_lives_in_a_doc_it_links(name):
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    for fact in MOVED[name]:
        assert fact in text, (name, fact)
    assert f"](docs/{name})" in readme(), name


@pytest.mark.parametrize("name", ["teaching.md", "teaching.zh.md"])
def test_the_teachers_guide_names_the_article(name):
    text = (ROOT / "docs" / name).read_text(encoding="utf-8")
    assert ARTICLE in text.split("\n\n**", 1)[0], "named in the guide's first paragraph"
