"""Terraform, cloudbuild.yaml and the function archives agree with the code.

The code side is derived, never listed: topics from gleaner.messages, consumers from
gleaner.stages.STAGES, entry points from functions/*/main.py, settings from gleaner.config.
Terraform is parsed with python-hcl2 (providers cannot be downloaded here, so no `validate`).
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml

from gleaner.changes.events import TOPIC as CHANGES_TOPIC
from gleaner.config import Settings
from gleaner.messages import TOPICS, DeliveryTask, ScrapeBatch
from gleaner.stages import STAGES
from tests.cloud_fixtures import emulators

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM = ROOT / "terraform"


def _clean(value: Any) -> Any:
    """python-hcl2 keeps HCL's quotes on strings and keys; strip them and its bookkeeping keys."""
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items() if k not in ("__comments__", "__is_block__")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


@pytest.fixture(scope="module")
def tf() -> dict[str, Any]:
    merged: dict[str, Any] = {"locals": {}, "resource": {}, "variable": {}, "data": {}, "output": {}}
    for path in sorted(TERRAFORM.glob("*.tf")):
        parsed = _clean(hcl2.loads(path.read_text()))
        for block in parsed.get("locals", []):
            merged["locals"].update(block)
        for kind in ("resource", "data"):
            for block in parsed.get(kind, []):
                for rtype, named in block.items():
                    merged[kind].setdefault(rtype, {}).update(named)
        for kind in ("variable", "output"):
            for block in parsed.get(kind, []):
                merged[kind].update(block)
    return merged


def _functions(tf: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {**tf["locals"]["http_functions"], **tf["locals"]["event_functions"]}


def test_terraform_is_formatted():
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip("terraform is not installed")
    result = subprocess.run([terraform, "fmt", "-check", "-recursive", str(TERRAFORM)], capture_output=True, text=True)
    assert result.returncode == 0, f"terraform fmt would change: {result.stdout}"


def test_every_topic_the_code_publishes_is_declared_and_nothing_else(tf):
    declared = {*tf["locals"]["topics"], tf["locals"]["dead_letter_topic"]}
    # Scrape batches and webhook deliveries are Cloud Tasks, not topics.
    assert declared == (set(TOPICS) - {ScrapeBatch.topic, DeliveryTask.topic}) | {emulators.DEAD_LETTER_TOPIC}


def test_change_events_have_their_topic_and_every_function_that_announces_may_publish_there(tf):
    topic = tf["resource"]["google_pubsub_topic"]["documents_changed"]
    assert topic["name"] == CHANGES_TOPIC
    publishers = tf["resource"]["google_pubsub_topic_iam_member"]["announce"]
    assert publishers["topic"] == "${google_pubsub_topic.documents_changed.id}"
    # Every stage whose handler flushes the outbox (gleaner.changes.outbox.flush) may publish.
    stages_that_flush = {"map", "scrape", "snapshot"}
    assert stages_that_flush <= set(tf["locals"]["announces"])


def test_webhook_deliveries_go_through_the_notify_queue_with_backoff_starting_at_seconds(tf):
    queue = tf["resource"]["google_cloud_tasks_queue"]["notify"]
    assert queue["name"] == Settings().notify_queue
    retry = queue["retry_config"][0]
    assert retry["max_attempts"] == "${var.notify_max_attempts}"
    assert tf["variable"]["notify_max_attempts"]["default"] == Settings().notify_max_attempts
    assert int(retry["min_backoff"].rstrip("s")) < 60  # the first retry within a minute (DESIGN.md)
    enqueuers = set(tf["locals"]["schedules_deliveries"])
    # Those who schedule deliveries know the scrape function's URL (the tasks' target) and may act as
    # the tasks identity that invokes it.
    assert enqueuers <= set(tf["locals"]["event_functions"])
    acts_as = tf["resource"]["google_service_account_iam_member"]["acts_as_tasks_invoker_for_deliveries"]
    assert acts_as["for_each"] == "${toset(local.schedules_deliveries)}"


def test_every_consumed_topic_is_pushed_to_its_stage_function_with_the_same_subscription_name(tf):
    routes = tf["locals"]["push_routes"]
    events = tf["locals"]["event_functions"]
    expected = {r.topic: r for r in emulators.push_routes() if r.topic in TOPICS and r.topic != ScrapeBatch.topic}
    assert set(routes) == set(expected)
    for topic, function in routes.items():
        stage = STAGES[topic][0]
        assert events[function]["stage"] == stage and events[function]["entry_point"] == "on_event"
        assert f"{topic}-{stage}" == expected[topic].subscription
    handler = events[tf["locals"]["dead_letter_handler"]]
    assert (handler["stage"], handler["entry_point"]) == emulators.DEAD_LETTER_HANDLER


def test_every_push_subscription_retries_with_backoff_then_dead_letters(tf):
    push = tf["resource"]["google_pubsub_subscription"]["push"]
    assert push["retry_policy"][0]["minimum_backoff"] and push["retry_policy"][0]["maximum_backoff"]
    policy = push["dead_letter_policy"][0]
    assert policy["max_delivery_attempts"] == "${var.max_delivery_attempts}"
    assert tf["variable"]["max_delivery_attempts"]["default"] == Settings().max_delivery_attempts
    queue = tf["resource"]["google_cloud_tasks_queue"]["scrape"]
    assert queue["retry_config"][0]["max_attempts"] == "${var.max_delivery_attempts}"


def test_the_scrape_queue_is_the_one_the_code_enqueues_to_with_rate_limits(tf):
    queue = tf["resource"]["google_cloud_tasks_queue"]["scrape"]
    assert queue["name"] == Settings().tasks_queue
    assert set(queue["rate_limits"][0]) == {"max_dispatches_per_second", "max_concurrent_dispatches"}
    scrape = _functions(tf)["scrape"]
    assert (STAGES[ScrapeBatch.topic][0], "on_http") == (scrape["stage"], scrape["entry_point"])


def test_every_entry_point_in_functions_is_deployed_and_every_deployed_one_exists(tf):
    in_code = {(stage, entry) for stage, entries in emulators.entry_points().items() for entry in entries}
    deployed = {(f["stage"], f["entry_point"]) for f in _functions(tf).values()}
    assert deployed == in_code
    assert {stage for stage, _ in in_code} == {"map", "sample", "scrape", "snapshot", "ingest"}


def test_functions_are_built_from_the_archive_cloud_build_uploads(tf):
    for kind in ("http", "event"):
        source = tf["resource"]["google_cloudfunctions2_function"][kind]["build_config"][0]["source"][0]
        assert source["storage_source"][0]["object"] == "${var.source_prefix}/${each.value.stage}.zip"


def test_every_gleaner_setting_terraform_sets_is_one_the_code_reads(tf):
    config = (ROOT / "shared" / "gleaner" / "config.py").read_text()
    text = "\n".join(p.read_text() for p in TERRAFORM.glob("*.tf"))
    names = set(re.findall(r"\b(GLEANER_[A-Z_]+)\s*=", text))
    assert names, "terraform sets no GLEANER_* variables?"
    assert {n for n in names if f'"{n}"' not in config} == set()


def test_each_function_has_its_own_service_account(tf):
    accounts = tf["resource"]["google_service_account"]["fn"]
    assert accounts["for_each"] == "${local.all_functions}"
    assert set(tf["locals"]["publishes"]) == set(_functions(tf))


def test_run_artefacts_expire_by_custom_time_and_the_bucket_is_locked_down(tf):
    bucket = tf["resource"]["google_storage_bucket"]["blobs"]
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["versioning"][0]["enabled"] is False
    rule = bucket["lifecycle_rule"][0]
    assert rule["condition"][0]["days_since_custom_time"] == "${var.run_artefact_retention_days}"
    assert rule["action"][0]["type"] == "Delete"


def test_the_hourly_feed_walk_posts_an_empty_object_to_the_ingest_webhook(tf):
    job = tf["resource"]["google_cloud_scheduler_job"]["feed_walk"]
    target = job["http_target"][0]
    assert target["uri"] == '${google_cloudfunctions2_function.http["ingest-webhook"].service_config[0].uri}'
    assert target["body"] == '${base64encode("{}")}'
    webhook = _functions(tf)["ingest-webhook"]
    assert (webhook["stage"], webhook["entry_point"]) == ("ingest", "on_http")


def test_one_scheduler_job_ticks_map_and_no_job_is_declared_per_crawl(tf):
    jobs = tf["resource"]["google_cloud_scheduler_job"]
    assert set(jobs) == {"tick", "feed_walk"}
    target = jobs["tick"]["http_target"][0]
    assert target["uri"] == '${google_cloudfunctions2_function.http["map-http"].service_config[0].uri}'
    assert target["body"] == "${base64encode(jsonencode({tick = true}))}"
    assert "crawls" not in tf["variable"]


# -- cloudbuild.yaml ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def build() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "cloudbuild.yaml").read_text()))


def test_the_build_tests_packages_uploads_and_deploys_in_that_order(build):
    assert [s["id"] for s in build["steps"]] == ["test", "package", "upload", "deploy"]


def test_every_file_a_build_step_names_exists(build):
    for step in build["steps"]:
        text = " ".join(map(str, step.get("args", [])))
        for path in re.findall(r"\b((?:infra|tests|terraform|functions|shared)(?:/[\w.-]+)*)", text):
            assert (ROOT / path).exists(), f"step {step['id']} names {path}, which does not exist"


def test_every_substitution_the_build_uses_is_defined(build):
    builtin = {"PROJECT_ID", "BUILD_ID", "SHORT_SHA", "COMMIT_SHA", "REPO_NAME", "BRANCH_NAME", "TAG_NAME",
               "LOCATION", "PROJECT_NUMBER"}
    used = set(re.findall(r"\$\{(\w+)\}", (ROOT / "cloudbuild.yaml").read_text()))
    assert used - builtin <= set(build["substitutions"])


def test_the_deploy_step_sets_every_required_terraform_variable_and_only_real_ones(build, tf):
    deploy = " ".join(next(s for s in build["steps"] if s["id"] == "deploy")["args"])
    passed = set(re.findall(r"-var=(\w+)=", deploy))
    required = {name for name, spec in tf["variable"].items() if "default" not in spec}
    assert required <= passed <= set(tf["variable"])


def test_the_upload_lands_where_terraform_reads_the_archives(build):
    upload = " ".join(next(s for s in build["steps"] if s["id"] == "upload")["args"])
    assert "gs://${_SOURCE_BUCKET}/${_SOURCE_PREFIX}/" in upload
    deploy = " ".join(next(s for s in build["steps"] if s["id"] == "deploy")["args"])
    assert "-var=source_bucket=${_SOURCE_BUCKET}" in deploy and "-var=source_prefix=${_SOURCE_PREFIX}" in deploy


def test_packaging_vendors_the_package_beside_each_entry_point(tmp_path):
    import sys

    sys.path.insert(0, str(ROOT / "infra"))
    import package_functions

    assert package_functions.main(["--out", str(tmp_path)]) == 0
    for stage, entries in emulators.entry_points().items():
        with zipfile.ZipFile(tmp_path / f"{stage}.zip") as archive:
            names = set(archive.namelist())
            assert {"main.py", "requirements.txt", "gleaner/__init__.py", "gleaner/entry.py",
                    "gleaner/migrations/versions/0001_knowledge_core.py"} <= names
            assert not any("__pycache__" in n for n in names)
            tree = ast.parse(archive.read("main.py"))
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert set(entries) <= defined
            requirements = archive.read("requirements.txt").decode()
            assert "functions-framework" in requirements and "google-cloud-pubsub" in requirements
            assert "pgserver" not in requirements
    first = (tmp_path / "map.zip").read_bytes()
    package_functions.main(["--out", str(tmp_path)])
    assert (tmp_path / "map.zip").read_bytes() == first  # reproducible archives
