"""Redaction: `redact=` runs in the snapshot, so no unredacted byte of a run reaches the judge (the
stub server's recorded requests), the outbox file, Redis, a store or a webhook receiver. Real agno
agents with a real tool, real litellm over HTTP, real SQLite, JSONL and redis-server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import redis
from conftest import serve_until_drained, wait_for

import judgehooks
from judgehooks import JsonlStore, RedactionError, SQLiteStore, WebhookNotifier
from judgehooks.redact import KINDS, PII, PIIRedactor, Presidio, iban_valid, luhn_valid, redactor_name
from judgehooks.testing import WebhookReceiver

EMAIL, PHONE, CARD = "alice.smith@example.com", "+49 30 1234567", "4111 1111 1111 1111"
IBAN, KEY = "DE89 3704 0044 0532 0130 00", "sk-proj-Zq8vN3kLp0RtYw6XbC2dFh"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLWJ5dGVz"
SECRETS = (EMAIL, PHONE, CARD, IBAN, KEY, JWT)
#: fragments none of which may be left anywhere: each secret's distinctive part, never one a random
#: id, nonce or file byte could hold by chance (digits alone are hex: "1234567" would be, in time)
FRAGMENTS = ("alice.smith", "example.com", "30 1234567", "4111 1111", "3704 0044", "Zq8vN3kLp0", "eyJhbGci",
             "c2lnbmF0")


def leaks(blob: str | bytes) -> list[str]:
    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    return [f for f in FRAGMENTS if f in text]


# ---- the built-in redactor ----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "masked"), [
    (f"mail {EMAIL} now", "mail [EMAIL] now"),
    ("x@y.io,z.w+tag@mail.example.org.", "[EMAIL],[EMAIL]."),
    (f"call {PHONE}", "call [PHONE]"),
    ("call (212) 555-0182 or 212-555-0182", "call [PHONE] or [PHONE]"),
    ("Festnetz 030 1234567, portable 06 12 34 56 78", "Festnetz [PHONE], portable [PHONE]"),
    (f"card {CARD} exp 12/26", "card [CARD] exp 12/26"),  # the expiry date stays: the number is found alone
    ("card 5500-0000-0000-0004.", "card [CARD]."),
    (f"iban {IBAN} thanks", "iban [IBAN] thanks"),
    ("GB82WEST12345698765432", "[IBAN]"),
    (f"key {KEY}", "key [API_KEY]"),
    ('api_key="hunter2hunter2" password: s3cr3t-v4lue', 'api_key="[API_KEY]" password: [API_KEY]'),
    ("AKIAIOSFODNN7EXAMPLE and ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[API_KEY] and [API_KEY]"),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", "Authorization: Bearer [API_KEY]"),
    (f"token {JWT}.", "token [JWT]."),
])
def test_pii_masks_each_kind_with_its_labelled_placeholder(text, masked):
    assert PII(text) == masked


# Audit 3, L11: secrets PII left as they were.
@pytest.mark.parametrize(("text", "masked"), [
    ("card 4111.1111.1111.1111 exp 12.26", "card [CARD] exp 12.26"),
    ("card 5500.0000.0000.0004.", "card [CARD]."),
    ("card 4111  1111  1111  1111", "card [CARD]"),
    ("dsn postgresql://bob:hunter2secret@db.example:5432/app", "dsn postgresql://bob:[API_KEY]@db.example:5432/app"),
    ("redis://:s3cretpassw0rd@localhost:6379/0", "redis://:[API_KEY]@localhost:6379/0"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZGxvbmc=", "Authorization: Basic [API_KEY]"),
    ('{"authorization": "Bearer shortkey12"}', '{"authorization": "Bearer [API_KEY]"}'),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_SECRET_ACCESS_KEY=[API_KEY]"),
    ('private_key: "abcdefghijkl"', 'private_key: "[API_KEY]"'),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA+/=\n-----END RSA PRIVATE KEY----- ok", "[PRIVATE_KEY] ok"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", "[PRIVATE_KEY]"),  # cut off: still masked
])
def test_pii_masks_secrets_in_the_forms_the_third_audit_found_unmasked(text, masked):
    assert PII(text) == masked


# Audit 4, item 10: three common forms PII missed.
@pytest.mark.parametrize(("text", "masked"), [
    ("card ４１１１ １１１１ １１１１ １１１１ exp １２/２６", "card [CARD] exp １２/２６"),  # full-width digits
    ("カード番号：４１１１\u3000１１１１\u3000１１１１\u3000１１１１です", "カード番号：[CARD]です"),  # and spaces
    ("card ٤١١١ ١١١١ ١١١١ ١١١١", "card [CARD]"),  # Arabic-Indic digits
    ("card 4111\u00a01111\u00a01111\u00a01111 ok", "card [CARD] ok"),  # no-break spaces
    ("電話 ０３－１２３４－５６７８", "電話 [PHONE]"),
    ("token=abcdef123456 and x", "token=[API_KEY] and x"),
    ("https://hooks.example/cb?token=Zq8vN3kLp0RtYw6X", "https://hooks.example/cb?token=[API_KEY]"),
    ('{"token": "abc123def456", "refresh_token": "8f14e45fceea167a"}',
     '{"token": "[API_KEY]", "refresh_token": "[API_KEY]"}'),
    ("my secret access key is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY.", "my secret access key is [API_KEY]."),
    ('["AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"]', '["[API_KEY]", "[API_KEY]"]'),
])
def test_pii_masks_full_width_card_numbers_token_assignments_and_bare_aws_secret_keys(text, masked):
    assert PII(text) == masked


@pytest.mark.parametrize("text", [
    "max_tokens=4096, tokens: 5, token_count=12345678, token: tokenization, the next token: probably",
    "I spent 1,234 tokens: fine; a token is about four characters",
    "バージョン３．１１．４、２０２６年１２月４日、注文番号１２３４５６７８",  # full-width version, date and order
    "カード ４１１１ １１１１ １１１１ １１１２",  # full-width, but fails the Luhn check
    "commit da39a3ee5e6b4b0d3255bfef95601890afd80709 (DA39A3EE5E6B4B0D3255BFEF95601890AFD80709)",  # hex: one case
    "ids 123e4567-e89b-12d3-a456-426614174000, fair-hypatia-7b3bc14d, helpful-00001, run_7F3a9c2E8d1B",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, digest 3q2+7w==",
    "class AbstractSingletonProxyFactoryBeanImplTest and src/Main/Java/Com/Example/Project2/Model.java",
])
def test_pii_leaves_ordinary_text_ids_hashes_and_full_width_numbers_that_are_no_secret(text):
    assert PII(text) == text


@pytest.mark.parametrize("text", [
    "card 4111.1111.1111.1112",  # dots, but fails the Luhn check
    "on 01.02.2026, version 3.11.4, host 192.168.100.200, 3.14159265358979",
    "Basic understanding of the Bearer of news",
    "see https://example.com/a:b@c and mailto:x",
])
def test_pii_leaves_dotted_numbers_and_plain_words_that_are_no_secret(text):
    assert PII(text) == text


@pytest.mark.parametrize("text", [
    "card 4111 1111 1111 1112",  # fails the Luhn check
    "iban DE00370400440532013000",  # fails mod 97
    "on 01.02.2026 and 2026-12-01, order 12345678, version 3.11.4, 1,234,567 USD",  # dates and numbers
    "a@b is no email, nor is @example.com, nor user@localhost",
    "the task-based plan and the ghost key",  # look like key prefixes, are words
])
def test_pii_leaves_what_fails_its_check_or_is_not_personal_data(text):
    assert PII(text) == text


def test_checks_are_the_standard_ones():
    assert luhn_valid("79927398713") and not luhn_valid("79927398710") and not luhn_valid("")
    assert iban_valid("DE89370400440532013000") and iban_valid("NO9386011117947")
    assert not iban_valid("DE89370400440532013001") and not iban_valid("DE8937040044053201300")  # wrong length


def test_a_redactor_for_some_kinds_masks_only_those_and_unknown_kinds_are_refused_by_name():
    only = PIIRedactor("email", "card")
    assert only(f"{EMAIL} {CARD} {KEY}") == f"[EMAIL] [CARD] {KEY}" and only.name == "PII(email,card)"
    assert PII.kinds == KINDS and redactor_name(PII) == "PII"
    with pytest.raises(ValueError, match=r"unknown PII kind\(s\) \['ssn'\]: choose from jwt, api_key"):
        PIIRedactor("email", "ssn")


@pytest.mark.parametrize("hostile", [
    "a" * 200_000, "1" * 200_000, "1 " * 100_000, "a@" * 100_000, "x@" + "a." * 100_000, "@a.b" * 50_000,
    "eyJ" * 70_000, "eyJx." * 40_000, "DE89 " * 40_000, "ZZ89 " * 40_000, "+1 " * 70_000, "0 " * 100_000,
    "password=" * 22_000, "sk-" * 70_000, "Bearer " * 30_000, "4111111111111111" * 12_500,
    "A" * 200_000, "aB3/" * 50_000, "aB3 " * 50_000, "٤" * 200_000, "４ " * 100_000, "token:" * 33_000,
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY " * 5_000, "４１１１－" * 40_000,
])
def test_hostile_200_kb_texts_are_redacted_in_one_pass_each(hostile):
    """Each pattern's match can start only where a run of its characters starts, so these finish in
    linear time (the benchmark shows the time); a backtracking pattern would not finish here."""
    out = PII(hostile)
    assert isinstance(out, str) and len(out) > 0


def test_a_secret_inside_200_kb_is_still_found():
    text = "lorem ipsum " * 8_000 + f"write to {EMAIL} or pay {IBAN}" + " dolor" * 8_000
    assert leaks(PII(text)) == [] and "[EMAIL]" in PII(text) and "[IBAN]" in PII(text)


def test_redact_must_be_callable(make_judge):
    with pytest.raises(TypeError, match=r"redact must be a function from text to text .*got str"):
        make_judge(redact="PII")


# ---- nothing unredacted leaves: judge, store, outbox, webhook, Redis ------------------------------

def lookup(text: str) -> str:
    """Look a customer up."""
    return f"customer {EMAIL}, phone {PHONE}, card {CARD}, iban {IBAN}"


QUESTION = f"my key is {KEY} and my token {JWT}; mail {EMAIL} [[tool=lookup]] [[arg_text={CARD}]]"


def run_agent(make_agent, judge):
    agent = make_agent(judge, tools=[lookup])
    return agent.run(QUESTION, metadata={"customer": {"email": EMAIL, "iban": [IBAN]}, "phone": PHONE})


def test_inline_no_unredacted_byte_reaches_the_judge_or_the_store(make_judge, make_agent, store, server):
    out = run_agent(make_agent, make_judge(redact=PII, include_tool_calls=True))
    assert leaks(out.content) != []  # the run itself is untouched: only what judgehooks keeps is redacted
    [record] = store.records
    assert record.status == "passed" and record.redacted_by == "PII"
    assert leaks(record.model_dump_json()) == []
    assert "[EMAIL]" in record.input and "[CARD]" in record.output and record.metadata["customer"]["email"] == "[EMAIL]"
    prompts = server.settings.judge_prompts
    assert len(prompts) == 1 and leaks(prompts[0]) == []
    assert "[IBAN]" in prompts[0] and "lookup" in prompts[0]  # tool calls reached the judge, redacted


def outbox_puts(monkeypatch) -> list[str]:
    """The context of every job the outbox is given, as written (the real put still runs): its row is
    deleted once graded, so reading the file afterwards may miss it."""
    from judgehooks._grading.journal import JournalLog
    from judgehooks._grading.outbox import Outbox

    puts: list[str] = []
    for log in (Outbox, JournalLog):  # the journal's, and the outbox file's (the journal's fallback, resume)
        real = log.put

        def put(outbox, job, context=None, *, _real=real, **kw):
            _real(outbox, job, context, **kw)
            puts.append(context if context is not None else json.dumps(job.context))

        monkeypatch.setattr(log, "put", put)
    return puts


def test_background_outbox_file_jsonl_store_and_webhook_see_no_unredacted_byte(make_judge, make_agent, tmp_path,
                                                                               server, monkeypatch):
    outbox, path = tmp_path / "jobs.outbox.db", tmp_path / "records.jsonl"
    journaled = outbox_puts(monkeypatch)
    with WebhookReceiver() as receiver:
        notifier = WebhookNotifier(receiver.url, fields=WebhookNotifier.ALL_FIELDS)
        judge = make_judge(redact=PII, include_tool_calls=True, run_in_background=True, outbox=str(outbox),
                           store=JsonlStore(str(path)), on_record=notifier)
        run_agent(make_agent, judge)
        assert judgehooks.drain(30)
        [post] = receiver.wait_for(1)
    assert post["redacted_by"] == "PII" and "[EMAIL]" in post["input"] and leaks(json.dumps(post)) == []
    [line] = path.read_text().splitlines()
    assert json.loads(line)["redacted_by"] == "PII" and leaks(line) == []
    # The job as put in the outbox, and the outbox files (SQLite keeps deleted bytes in its pages
    # and WAL): none leak.
    assert any("[EMAIL]" in put for put in journaled)
    assert leaks("".join(journaled)) == []
    files = [p for p in tmp_path.iterdir() if p.name.startswith("jobs.outbox.db")]
    assert files and all(leaks(p.read_bytes()) == [] for p in files)
    assert server.settings.judge_prompts and leaks("\n".join(server.settings.judge_prompts)) == []


def test_the_redis_job_and_the_workers_record_hold_no_unredacted_byte(make_judge, make_agent, redis_base, tmp_path,
                                                                      server):
    from judgehooks._grading.redis.broker import STREAM
    from judgehooks._grading.redis.worker import Worker

    rds = redis.Redis.from_url(redis_base)
    rds.flushdb()
    judge = make_judge(name="redacted", redact=PII, include_tool_calls=True, run_in_background=True,
                       broker=redis_base, outbox=str(tmp_path / "producer.outbox.db"))
    out = run_agent(make_agent, judge)
    assert judgehooks.drain(30) and rds.xlen(STREAM) == 1
    [(_, fields)] = rds.xrange(STREAM)
    assert all(leaks(v) == [] for v in fields.values()) and b"[EMAIL]" in b"".join(fields.values())
    store = SQLiteStore(str(tmp_path / "worker.db"))
    worker = Worker(redis_base, store, evaluators={"redacted": judge}, reclaim_after=2)

    serve_until_drained(worker, rds, STREAM)
    [record] = asyncio.run(store.query(run_id=out.run_id))
    assert record.redacted_by == "PII" and leaks(record.model_dump_json()) == []
    assert leaks(Path(store.path).read_bytes()) == [] and leaks("\n".join(server.settings.judge_prompts)) == []
    rds.close()


def test_offline_run_is_redacted_too(make_judge, store):
    result = make_judge(redact=PII).run(input=f"who is {EMAIL}?", output=f"their card is {CARD}")
    [record] = result.results
    assert (record.input, record.output, record.redacted_by) == ("who is [EMAIL]?", "their card is [CARD]", "PII")


# ---- a redactor that fails ----------------------------------------------------------------------

def failing(text: str) -> str:
    raise ValueError(f"cannot redact {text}")  # its message quotes the text: it must not be kept


@pytest.mark.parametrize("redact", [failing, lambda text: None], ids=["raises", "returns-none"])
def test_a_failing_redactor_gives_an_error_record_and_nothing_unredacted_leaves(make_judge, make_agent, store,
                                                                                 server, redact):
    errors = []
    out = run_agent(make_agent, make_judge(redact=redact, include_tool_calls=True, on_error=errors.append))
    [record] = store.records
    assert record.status == "error" and record.error_type == RedactionError.__name__
    assert record.run_id == out.run_id and (record.input, record.output) == ("", "")
    assert "customer" not in record.metadata
    assert redactor_name(redact) in record.redacted_by and leaks(record.model_dump_json()) == []
    assert "withheld" in record.error_message and errors == [record]
    assert server.settings.counts["judge"] == 0  # no judge call: there was nothing it may read


def test_a_failing_redactor_in_the_background_keeps_nothing_in_the_outbox(make_judge, make_agent, tmp_path, store,
                                                                         monkeypatch):
    journaled = outbox_puts(monkeypatch)
    judge = make_judge(redact=failing, run_in_background=True, outbox=str(tmp_path / "o.db"))
    run_agent(make_agent, judge)
    assert judgehooks.drain(30)
    wait_for(lambda: len(store.records) == 1)
    assert store.records[0].error_type == "RedactionError"
    assert all(leaks(p.read_bytes()) == [] for p in tmp_path.iterdir() if p.name.startswith("o.db"))
    assert leaks("".join(journaled)) == []


def test_redact_can_be_configured_and_takes_effect_from_the_next_run(make_judge, make_agent, store):
    judge = make_judge()
    agent = make_agent(judge)
    agent.run(f"first {EMAIL}")
    judge.configure(redact=PII)
    agent.run(f"second {EMAIL}")
    first, second = sorted(store.records, key=lambda r: r.input)
    assert EMAIL in first.input and first.redacted_by is None
    assert second.input == "second [EMAIL]" and second.redacted_by == "PII"


# ---- Presidio ------------------------------------------------------------------------------------

def _blank_presidio():
    """An AnalyzerEngine on a blank spaCy pipeline: Presidio's pattern recognizers (email, cards, IBAN,
    phone numbers via `phonenumbers`) run, its named-entity model does not (no spaCy model ships in a
    package we may install here)."""
    pytest.importorskip("presidio_analyzer")
    import spacy
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": "blank-en"}])
    engine.nlp = {"en": spacy.blank("en")}
    return AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])


def test_presidio_adapter_masks_what_presidio_finds_with_its_entity_type(make_judge, store, server):
    presidio = Presidio(analyzer=_blank_presidio(), entities=["EMAIL_ADDRESS", "CREDIT_CARD", "IBAN_CODE"])
    assert presidio(f"mail {EMAIL}, card {CARD}") == "mail [EMAIL_ADDRESS], card [CREDIT_CARD]"
    result = make_judge(redact=presidio).run(input=f"iban {IBAN}?", output=f"mail {EMAIL}")
    [record] = result.results
    assert record.redacted_by == "Presidio" and leaks(record.model_dump_json()) == []
    assert record.input == "iban [IBAN_CODE]?" and leaks("\n".join(server.settings.judge_prompts)) == []


def _ner_presidio(tmp_path: Path):
    """Presidio's named-entity path for real, without a spaCy model from a hub: a spaCy pipeline whose
    `entity_ruler` tags a person and a city, saved to a folder and loaded by Presidio's NlpEngineProvider
    exactly as a user loads `en_core_web_lg` (the folder's path in place of the model's name). Presidio's
    SpacyRecognizer turns the pipeline's PERSON and GPE entities into PERSON and LOCATION results."""
    pytest.importorskip("presidio_analyzer")
    import spacy
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([
        {"label": "PERSON", "pattern": [{"LOWER": "ada"}, {"LOWER": "lovelace"}]},
        {"label": "GPE", "pattern": [{"LOWER": "marylebone"}]},
    ])
    nlp.to_disk(tmp_path / "model")
    engine = NlpEngineProvider(nlp_configuration={
        "nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": str(tmp_path / "model")}],
    }).create_engine()
    return AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])


def test_presidio_masks_named_entities_from_the_spacy_pipeline(tmp_path, make_judge, store, server):
    analyzer = _ner_presidio(tmp_path)
    found = analyzer.analyze(text="Ada Lovelace lives in Marylebone.", language="en")
    assert {(r.entity_type, r.recognition_metadata["recognizer_name"]) for r in found} == {
        ("PERSON", "SpacyRecognizer"), ("LOCATION", "SpacyRecognizer")}  # the NER path, not a pattern
    presidio = Presidio(analyzer=analyzer, entities=["PERSON", "LOCATION", "EMAIL_ADDRESS"])
    assert presidio(f"Ada Lovelace lives in Marylebone, mail {EMAIL}") == (
        "[PERSON] lives in [LOCATION], mail [EMAIL_ADDRESS]")
    result = make_judge(redact=presidio).run(input="Where does Ada Lovelace live?",
                                             output="ada lovelace lives in Marylebone.")
    [record] = result.results
    assert (record.input, record.output) == ("Where does [PERSON] live?", "[PERSON] lives in [LOCATION].")
    assert record.redacted_by == "Presidio"
    sent = "\n".join(server.settings.judge_prompts).lower()
    assert "lovelace" not in sent and "marylebone" not in sent and "[person]" in sent


def test_presidio_without_the_extra_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "presidio_analyzer", None)
    with pytest.raises(ImportError, match=r"pip install 'judgehooks\[pii\]'"):
        Presidio()


def test_every_secret_trips_the_leak_check():
    assert all(leaks(secret) for secret in SECRETS)


def test_ids_tool_names_and_metadata_keys_are_kept_and_objects_are_redacted_as_their_text():
    from judgehooks import EvalContext, ToolCall
    from judgehooks._hooks.redaction import redact_context

    class Customer:
        def __str__(self) -> str:
            return f"Customer({EMAIL})"

    ctx = EvalContext(input=EMAIL, output="ok", user_id="user-7", run_id="run-1",
                      tool_calls=(ToolCall(name="lookup", arguments={"who": [EMAIL, 3]}, result=CARD),),
                      metadata={EMAIL: "key", "customer": Customer(), "n": 2, "flag": True})
    out = redact_context(ctx, PII)
    assert (out.input, out.user_id, out.run_id, out.redacted_by) == ("[EMAIL]", "user-7", "run-1", "PII")
    [call] = out.tool_calls
    assert (call.name, call.arguments, call.result) == ("lookup", {"who": ["[EMAIL]", 3]}, "[CARD]")
    assert out.metadata == {EMAIL: "key", "customer": "Customer([EMAIL])", "n": 2, "flag": True}


# ---- the docs' comparison: what agno and pydantic-evals send their judge ----------------------------

def test_agnos_pii_guardrail_masks_the_input_only_so_its_judge_reads_the_output_as_is(server):
    from agno.agent import Agent
    from agno.eval import AgentAsJudgeEval as AgnoEval
    from agno.guardrails import PIIDetectionGuardrail
    from conftest import model

    judge = AgnoEval(criteria="The answer is helpful.", model=model(server), telemetry=False)
    agent = Agent(model=model(server), pre_hooks=[PIIDetectionGuardrail(mask_pii=True)], post_hooks=[judge],
                  instructions=f"[[answer=Write to {EMAIL}]]", telemetry=False)
    agent.run("My card is 4111111111111111, who do I write to?")
    sent = "\n".join(server.settings.judge_prompts)
    assert "4111111111111111" not in sent and "****" in sent  # the input: masked by the guardrail
    assert EMAIL in sent  # the answer: as the run has it


def test_pydantic_evals_llm_judge_reads_the_output_as_is(server):
    pytest.importorskip("pydantic_evals", reason="the comparison needs pydantic-evals (the dev extra)")
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_evals.evaluators import LLMJudge
    from pydantic_evals.online import OnlineEvalConfig, OnlineEvaluator, wait_for_evaluations

    results = []
    judge = LLMJudge(rubric="The answer is helpful.", include_input=True,
                     model=OpenAIChatModel("judge", provider=OpenAIProvider(base_url=server.base_url, api_key="k")))
    config = OnlineEvalConfig(default_sink=lambda result, *rest: results.append(result), emit_otel_events=False)

    @config.evaluate(OnlineEvaluator(evaluator=judge))
    async def answer(question: str) -> str:
        return f"Write to {EMAIL}"

    async def call() -> None:
        await answer("Who do I write to?")
        await wait_for_evaluations(timeout=30)

    asyncio.run(call())
    assert results and EMAIL in "\n".join(server.settings.judge_prompts)  # no redaction setting exists to stop it


# ---- sessions: the hook's book, the judge, the record; grade-sessions -------------------------------

def session_judge(server, store, tmp_path, **kwargs):
    from judgehooks import SessionJudge

    settings = dict(criteria="Helps the user over the whole conversation.", model="openai/judge",
                    api_base=server.base_url, api_key="test-key", store=store, retry_backoff=0.01, timeout=20,
                    outbox=str(tmp_path / "sessions.outbox.db"), idle_after=300, redact=PII, include_tool_calls=True)
    settings.update(kwargs)
    return SessionJudge(**settings)


def test_a_session_judge_redacts_the_book_the_judge_prompt_and_the_record(make_agent, store, server, tmp_path):
    judge = session_judge(server, store, tmp_path, name="redacted-session")
    agent = make_agent(judge, tools=[lookup])
    runs = [agent.run(QUESTION, session_id="s-red", metadata={"customer": {"email": EMAIL}, "phone": PHONE})
            for _ in range(2)]
    assert leaks(runs[0].content) != []  # the run itself is untouched
    # The turns wait in the session book (the outbox file) until the session is graded: none leak.
    files = [p for p in tmp_path.iterdir() if p.name.startswith("sessions.outbox.db")]
    assert files and all(leaks(p.read_bytes()) == [] for p in files)
    assert b"[EMAIL]" in b"".join(p.read_bytes() for p in files)
    [record] = judgehooks.end_session("s-red", judge.evaluator_name)
    assert record.redacted_by == "PII" and record.run_ids == [r.run_id for r in runs]
    assert leaks(record.model_dump_json()) == [] and store.records == [record]
    prompt = server.settings.judge_prompts[-1]
    assert leaks(prompt) == [] and "[EMAIL]" in prompt and "[IBAN]" in prompt and "lookup" in prompt


def test_a_team_session_redacts_what_its_members_were_asked_and_answered(make_team, store, server, tmp_path):
    judge = session_judge(server, store, tmp_path, name="redacted-team-session")
    team = make_team(judge)
    team.run(f"mail {EMAIL} card {CARD} [[tool=delegate_task_to_member]] [[arg_member_id=member]] "
             f"[[arg_task=write to {EMAIL} about card {CARD}]]", session_id="s-team-red")
    [record] = judgehooks.end_session("s-team-red", judge.evaluator_name)
    prompt = server.settings.judge_prompts[-1]
    assert "<<<MEMBERS-" in prompt and leaks(prompt) == [] and prompt.count("[EMAIL]") >= 2
    assert record.redacted_by == "PII" and leaks(record.model_dump_json()) == []


def test_a_failing_redactor_withholds_a_session_and_its_record_is_a_redaction_error(make_agent, store, server,
                                                                                    tmp_path):
    judge = session_judge(server, store, tmp_path, name="failing-session", redact=failing)
    make_agent(judge).run(f"mail {EMAIL}", session_id="s-fail")
    [record] = judgehooks.end_session("s-fail", judge.evaluator_name)
    assert (record.status, record.error_type, record.redacted_by) == ("error", "RedactionError", redactor_name(failing))
    assert leaks(record.model_dump_json()) == [] and server.settings.counts["judge"] == 0


def test_grade_sessions_redacts_every_turn_before_the_judge_and_the_store(capsys, server, tmp_path):
    from agno.agent import Agent
    from agno.db.sqlite import SqliteDb
    from conftest import model

    from judgehooks._cli import main

    agno_path, evals = tmp_path / "agno.db", tmp_path / "evals.db"
    agent = Agent(model=model(server), db=SqliteDb(db_file=str(agno_path)), id="stored", tools=[lookup],
                  telemetry=False)
    assert leaks(agent.run(QUESTION, session_id="s-db", metadata={"phone": PHONE}).content) != []
    code = main(["grade-sessions", "--agno-db", f"sqlite:///{agno_path}", "--store", f"sqlite:///{evals}",
                 "--criteria", "Helps the user.", "--model", "openai/judge", "--api-base", server.base_url,
                 "--api-key", "test-key", "--agent-id", "stored", "--redact", "PII"])
    assert code == 0, capsys.readouterr()
    [record] = SQLiteStore(str(evals)).query_sync(limit=None)
    assert record.redacted_by == "PII" and "[EMAIL]" in record.input and leaks(record.model_dump_json()) == []
    assert leaks(evals.read_bytes()) == []
    prompt = server.settings.judge_prompts[-1]
    assert leaks(prompt) == [] and "[CARD]" in prompt


def test_grade_sessions_names_a_redactor_it_cannot_import(capsys, tmp_path):
    from judgehooks._cli import main

    code = main(["grade-sessions", "--agno-db", f"sqlite:///{tmp_path / 'agno.db'}", "--store",
                 f"sqlite:///{tmp_path / 'evals.db'}", "--criteria", "c", "--redact", "no_such_module:redact"])
    assert code == 2 and "--redact no_such_module: No module named 'no_such_module'" in capsys.readouterr().err
