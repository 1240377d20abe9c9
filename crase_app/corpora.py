"""The corpus the explorer searches: the picker (sidebar), importing a file into a new corpus and embedding
it (Search page), and what every page says about the chosen corpus (its name, its demo queries).

The choice lives in the session (``st.session_state["corpus"]``: a :class:`CorpusChoice` key), so it holds
on every page. The list comes from :func:`crase_core.views.corpora.available`; a typed folder is opened only
inside the corpora folder (:func:`crase_core.views.corpora.resolve_choice`); uploaded files are written under
fixed names (never the uploaded name) into a temporary folder of the corpora folder, then imported by
:func:`crase_core.importers.corpus_import.import_corpus`.
"""

from __future__ import annotations

import gzip
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from crase_app.display import app_message, load_demo_queries, md_escape
from crase_core.errors import CraseError
from crase_core.settings.config import load_settings
from crase_core.views import corpora
from crase_core.views.corpora import CorpusChoice

KEY = "corpus"  # the chosen corpus's key (a plain key: widget state is dropped on pages that do not draw it)
TYPED = "corpus_typed"  # a folder the visitor typed and that opened
FORMAT_LABELS = {"jsonl": "JSONL (papers.jsonl + citations.tsv)", "openalex": "OpenAlex works (API results or snapshot parts)",
                 "s2": "Semantic Scholar datasets (papers, abstracts, citations files)"}


def _places() -> tuple[str | None, str | None]:
    rt = load_settings().runtime
    return rt.cache_dir, rt.corpus_dir


def offered() -> list[CorpusChoice]:
    """The corpora the picker lists (and the typed one, when it opened)."""
    cache_dir, operator = _places()
    out = corpora.available(cache_dir, operator)
    typed = st.session_state.get(TYPED)
    if isinstance(typed, CorpusChoice) and typed.key not in {c.key for c in out}:
        out.append(typed)
    return out


def chosen() -> CorpusChoice:
    """The corpus this session searches: the one picked, else the operator's (``$CRASE_CORPUS``), else the
    embedded one."""
    options = offered()
    key = st.session_state.get(KEY)
    return next((c for c in options if c.key == key), options[0])


def label(choice: CorpusChoice) -> str:
    """How pages name a corpus: "hep-th (embedded)" or the folder's name."""
    return choice.name


def _pick() -> None:
    st.session_state[KEY] = st.session_state["corpus_pick"]
    st.session_state.pop("autorun", None)


def _open_typed() -> None:
    text = st.session_state.get("corpus_path", "")
    cache_dir, operator = _places()
    try:
        choice = corpora.resolve_choice(text, cache_dir, operator)
    except CraseError as e:
        st.session_state["corpus_path_error"] = str(e)
        return
    st.session_state.pop("corpus_path_error", None)
    st.session_state[TYPED] = choice
    st.session_state[KEY] = choice.key


def corpus_picker() -> CorpusChoice:
    """The sidebar's corpus choice (every page draws it) and a box to open a corpus folder by its path."""
    options = offered()
    current = chosen()
    keys = [c.key for c in options]
    names = {c.key: c.name for c in options}
    st.session_state["corpus_pick"] = current.key
    st.selectbox("Corpus", keys, key="corpus_pick", format_func=lambda k: names.get(k, k), on_change=_pick,
                 help="The local corpus searched with the offline source: the embedded one and every corpus folder "
                 f"in {corpora.corpora_folder(_places()[0])} (where imports from the Search page go).")
    with st.popover("Open a corpus folder", icon=":material/folder_open:", width="stretch"):
        st.text_input("Corpus folder", key="corpus_path", on_change=_open_typed,
                      placeholder="NAME or a path inside the corpora folder",
                      help="A folder with papers.jsonl and citations.tsv inside "
                      f"{corpora.corpora_folder(_places()[0])} (or the server's own corpus).")
        problem = st.session_state.get("corpus_path_error")
        if problem:
            st.error(md_escape(problem), icon=":material/error:")
    return chosen()


def demo_queries(choice: CorpusChoice) -> list[dict[str, str]]:
    """Demo queries of the chosen corpus: the shipped ones for the embedded corpus; the titles of its most
    cited papers for any other (:func:`crase_core.views.corpora.demo_queries`)."""
    if choice.embedded:
        return load_demo_queries()
    try:
        stamp = max(p.stat().st_mtime_ns for p in choice.folder.iterdir() if p.is_file())
    except (OSError, ValueError):
        return []
    return _corpus_demos(str(choice.folder), stamp)


@st.cache_data(max_entries=16, show_spinner="Reading the corpus's most cited papers…")
def _corpus_demos(folder: str, stamp: int) -> list[dict[str, str]]:
    from crase_core.store.corpus_folder import open_or_build

    try:
        corpus = open_or_build(Path(folder))
    except (CraseError, OSError):
        return []
    return [{"label": d.label, "query": d.query, "id": d.paper_id} for d in corpora.demo_queries(corpus)]


# ---- import and embed ------------------------------------------------------------------------------------------
def _gz(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b"


def _write_uploads(fmt: str, files: list, folder: Path) -> None:
    """The uploaded files under fixed names the importer of ``fmt`` reads (the uploaded name only decides
    the role: papers / citations / abstracts)."""
    for i, f in enumerate(files):
        data = f.getvalue()
        name = (f.name or "").lower()
        gz = ".gz" if _gz(data) else ""
        if fmt == "jsonl":
            stem = "citations.tsv" if "citation" in name or name.endswith((".tsv", ".tsv.gz")) else "papers.jsonl"
            target = folder / f"{stem}{gz}"
        elif fmt == "s2":
            role = next((r for r in ("papers", "abstracts", "citations") if name.startswith(r)), None)
            if role is None:
                raise CraseError(f"{f.name}: a Semantic Scholar datasets file is named papers…, abstracts… or "
                                 "citations…")
            target = folder / f"{role}-{i:03d}.jsonl{gz}"
        else:
            suffix = ".json" if name.endswith(".json") else ".jsonl"
            target = folder / f"works-{i:03d}{suffix}{gz}"
        if target.exists():
            raise CraseError(f"two files for {target.name.split('.')[0]}: upload one of each")
        target.write_bytes(data)


def import_section(on_done=None) -> None:
    """Import an uploaded OpenAlex / Semantic Scholar / JSONL file into a new corpus of the corpora folder,
    with its progress; the new corpus becomes the chosen one."""
    from crase_core.importers.corpus_import import import_corpus
    from crase_core.store import corpus_store

    cache_dir, _ = _places()
    root = corpora.corpora_folder(cache_dir)
    with st.form("corpus_import", border=False):
        c1, c2 = st.columns([3, 2])
        fmt = c1.selectbox("Format", list(FORMAT_LABELS), format_func=lambda f: FORMAT_LABELS.get(f, f),
                           key="import_format") or "jsonl"
        name = c2.text_input("Name of the new corpus", key="import_name", max_chars=60, placeholder="mylab")
        files = st.file_uploader("Files", accept_multiple_files=True, key="import_files",
                                 type=["jsonl", "json", "tsv", "gz", "txt"],
                                 help="JSONL: papers.jsonl and citations.tsv (gzipped or not). OpenAlex: files of "
                                 "works (API results, or snapshot part_*.gz). Semantic Scholar: datasets files named "
                                 "papers…, abstracts…, citations….")
        go = st.form_submit_button("Import", icon=":material/upload:", type="primary")
    command = f"crase corpus import SRC {shlex.quote(str(root))}/NAME".replace("`", "'")  # a code span: no escapes
    st.caption(f"Imported corpora go to {md_escape(str(root))}; `{command}` puts one there from the command line.")
    if not go:
        return
    try:
        dest = corpora.import_folder(name or "", cache_dir)
        if not files:
            raise CraseError("choose the files to import")
    except CraseError as e:
        st.error(app_message(e), icon=":material/error:")
        return
    root.mkdir(parents=True, exist_ok=True)
    upload = Path(tempfile.mkdtemp(prefix=".upload-", dir=root))
    try:
        with st.status(f"Importing {md_escape(dest.name)}…", expanded=True) as status:
            bar = st.progress(0.0)
            line = st.empty()

            def progress(message: str) -> None:
                line.caption(md_escape(message))

            def step(s) -> None:
                bar.progress(min(max(float(s.fraction), 0.0), 1.0), text=md_escape(f"{s.stage}: {s.message}")[:200])

            try:
                _write_uploads(fmt, list(files), upload)
                with corpus_store.reporting(step):
                    result = import_corpus(upload, dest, fmt, progress=progress)
            except (CraseError, OSError, gzip.BadGzipFile) as e:
                status.update(label="The import stopped", state="error", expanded=True)
                st.error(app_message(e), icon=":material/error:")
                return
            bar.progress(1.0)
            status.update(label=f"Imported {dest.name}: {result.n_papers:,} papers, {result.n_citations:,} citations "
                          f"in {result.seconds:.1f} s", state="complete", expanded=False)
    finally:
        shutil.rmtree(upload, ignore_errors=True)
    choice = CorpusChoice(str(dest.resolve()), dest.name, dest.resolve())
    st.session_state[KEY] = choice.key
    if on_done is not None:
        on_done(choice)
    st.rerun()


def embed_section(choice: CorpusChoice) -> None:
    """Embed the chosen (imported) corpus with the on-device sentence model, turning semantic feedback on."""
    from crase_core.importers.corpus_embed import MiniLMEmbedder, embed_corpus

    if choice.embedded:
        st.caption("The embedded corpus ships its embeddings: semantic feedback is on.")
        return
    if not st.button("Embed this corpus", key="corpus_embed", icon=":material/scatter_plot:",
                     help="Compute a vector per paper with the on-device MiniLM model (no network), so searches "
                     "add papers close in meaning to the top hit (semantic feedback). Resumes if interrupted."):
        return
    with st.status(f"Embedding {md_escape(choice.name)}…", expanded=True) as status:
        line = st.empty()

        def progress(message: str) -> None:
            line.caption(md_escape(message))

        try:
            embedder: Any = MiniLMEmbedder()  # the on-device model (the CLI types it the same way)
            report = embed_corpus(choice.folder, embedder, progress=progress)
        except (CraseError, OSError) as e:
            status.update(label="The embedding stopped", state="error", expanded=True)
            st.error(app_message(e), icon=":material/error:")
            return
        status.update(label=("Embeddings up to date" if report.up_to_date else
                             f"Embedded {report.embedded:,} papers in {report.seconds:.1f} s"), state="complete",
                      expanded=False)
