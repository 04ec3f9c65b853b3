"""Terraform, cloudbuild.yaml and the function archives agree with the code.

The code side is derived, never listed: topics from gleaner.messages, consumers from
gleaner.stages.STAGES, entry points from functions/*/main.py, settings from gleaner.settings.config.
Terraform is parsed with python-hcl2 (providers cannot be downloaded here, so no `validate`).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import fields
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml

from gleaner.changes.events import TOPIC as CHANGES_TOPIC
from gleaner.logs import Event
from gleaner.messages import TOPICS, ArticlesAccepted, DeliveryTask, ScrapeBatch, decode
from gleaner.settings.config import HttpAuth, Settings
from gleaner.stages import STAGES
from tests.cloud_fixtures import emulators

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "infra"))

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


def _declared_topics(tf: dict[str, Any]) -> set[str]:
    """Topic names of every google_pubsub_topic resource: ours (for_each over locals) and any other file's."""
    declared = {*tf["locals"]["topics"], tf["locals"]["dead_letter_topic"]}
    for key, topic in tf["resource"]["google_pubsub_topic"].items():
        if key != "topic" and "${" not in topic["name"]:
            declared.add(topic["name"])
    return declared


def test_every_topic_the_code_publishes_is_declared(tf):
    # Scrape batches and webhook deliveries are Cloud Tasks, not topics.
    expected = (set(TOPICS) - {ScrapeBatch.topic, DeliveryTask.topic}) | {emulators.DEAD_LETTER_TOPIC, CHANGES_TOPIC}
    assert expected <= _declared_topics(tf)


def test_the_pipelines_topics_are_exactly_the_stages_ones(tf):
    assert {*tf["locals"]["topics"], tf["locals"]["dead_letter_topic"]} == \
        (set(STAGES) - {ScrapeBatch.topic}) | {emulators.DEAD_LETTER_TOPIC}


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
    # Those who schedule deliveries know the scrape function's URL (the tasks' target) and may act as
    # the tasks identity that invokes it.
    assert set(tf["locals"]["schedules_deliveries"]) <= set(tf["locals"]["knows_scrape_url"].replace(
        "${distinct(concat(local.enqueues_scrape, local.schedules_deliveries))}", " ".join(
            [*tf["locals"]["enqueues_scrape"], *tf["locals"]["schedules_deliveries"]])).split())
    acts_as = tf["resource"]["google_service_account_iam_member"]["acts_as_tasks_invoker_for_deliveries"]
    assert acts_as["for_each"] == "${toset(local.schedules_deliveries)}"


def test_every_consumed_topic_is_pushed_to_its_stage_function_with_the_same_subscription_name(tf):
    routes = tf["locals"]["push_routes"]
    events = tf["locals"]["event_functions"]
    expected = {r.topic: r for r in emulators.push_routes()
                if r.topic in TOPICS and r.topic not in (ScrapeBatch.topic, DeliveryTask.topic)}
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


def test_deliveries_survive_a_burst_of_429s_before_dead_lettering(tf):
    # A function at its max instances answers 429, which Pub/Sub and Cloud Tasks count as an attempt.
    assert tf["variable"]["max_delivery_attempts"]["default"] >= 15


def test_the_scrape_queue_is_the_one_the_code_enqueues_to_with_rate_limits(tf):
    queue = tf["resource"]["google_cloud_tasks_queue"]["scrape"]
    assert queue["name"] == Settings().tasks_queue
    assert set(queue["rate_limits"][0]) == {"max_dispatches_per_second", "max_concurrent_dispatches"}
    scrape = _functions(tf)["scrape"]
    assert (STAGES[ScrapeBatch.topic][0], "on_http") == (scrape["stage"], scrape["entry_point"])
    # No more batches dispatched at once than the scrape instances serve (else 429s).
    assert queue["rate_limits"][0]["max_concurrent_dispatches"] == \
        '${local.http_functions["scrape"].max_instances * local.http_functions["scrape"].concurrency}'


def test_every_queue_the_code_names_exists(tf):
    """Settings naming a Cloud Tasks queue (tasks_queue, and any later *_queue) name a declared queue."""
    declared = {q["name"] for q in tf["resource"]["google_cloud_tasks_queue"].values()}
    defaults = Settings()
    named = {getattr(defaults, f.name) for f in fields(Settings) if f.name.endswith("_queue")}
    assert named and named <= declared


def test_every_entry_point_in_functions_is_deployed_and_every_deployed_one_exists(tf):
    in_code = {(stage, entry) for stage, entries in emulators.entry_points().items() for entry in entries}
    deployed = {(f["stage"], f["entry_point"]) for f in _functions(tf).values()}
    assert deployed == in_code
    # The five pipeline stages, the back office and notify: functions of their own, but no stage.
    assert {stage for stage, _ in in_code} == {"map", "sample", "scrape", "snapshot", "ingest", "backoffice",
                                               "notify"}
    assert {stage for stage, _cls, _handler in STAGES.values()} == {"map", "sample", "scrape", "snapshot", "ingest"}


def test_functions_are_built_from_the_archive_cloud_build_uploads(tf):
    for kind in ("http", "event"):
        source = tf["resource"]["google_cloudfunctions2_function"][kind]["build_config"][0]["source"][0]
        assert source["storage_source"][0]["object"] == "${var.archives[each.value.stage]}"


def test_every_gleaner_setting_terraform_sets_is_one_the_code_reads(tf):
    # The settings room: the settings object and the readers it calls (GLEANER_HOME's, the language model's).
    settings_dir = ROOT / "shared" / "gleaner" / "settings"
    config = "\n".join(path.read_text() for path in sorted(settings_dir.glob("*.py")))
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


def test_the_feed_walk_publishes_a_walk_message_that_ingest_consumes(tf):
    job = tf["resource"]["google_cloud_scheduler_job"]["feed_walk"]
    target = job["pubsub_target"][0]
    assert target["topic_name"] == '${google_pubsub_topic.topic["articles-accepted"].id}'
    assert target["data"] == "${base64encode(local.walk_message)}"
    message = decode(tf["locals"]["walk_message"].replace('\\"', '"'))
    assert message == ArticlesAccepted(walk=True)
    assert STAGES[ArticlesAccepted.topic][0] == "ingest"


def test_one_scheduler_job_ticks_map_and_no_job_is_declared_per_crawl(tf):
    jobs = tf["resource"]["google_cloud_scheduler_job"]
    assert set(jobs) == {"operator", "feed_walk"}  # operator: the tick and the sweep
    assert jobs["operator"]["for_each"] == "${local.operator_jobs}"
    assert jobs["operator"]["http_target"][0]["body"] == "${base64encode(jsonencode(each.value.body))}"
    assert "crawls" not in tf["variable"]


# -- cloudbuild.yaml ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def build() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "cloudbuild.yaml").read_text()))


def test_the_build_tests_packages_uploads_deploys_and_migrates_in_that_order(build):
    assert [s["id"] for s in build["steps"]] == ["test", "package", "settings", "upload", "render-tag", "render-image",
                                                 "deploy", "migrate"]


def test_a_build_applies_the_deployments_own_settings_never_empty_access_lists(build, tf):
    """operators, feed_pollers, backoffice_invokers and alert channels are not in git: a trigger's build
    must read them, or its apply would remove every access grant they make."""
    settings = " ".join(next(s for s in build["steps"] if s["id"] == "settings")["args"])
    assert "gs://${_TF_STATE_BUCKET}/${_TF_SETTINGS} dist/settings.tfvars" in settings
    deploy = " ".join(next(s for s in build["steps"] if s["id"] == "deploy")["args"])
    assert "-var-file=../dist/settings.tfvars" in deploy
    access = {name for name, spec in tf["variable"].items() if spec.get("default") == []}
    assert {"operators", "feed_pollers", "backoffice_invokers", "notification_channels"} <= access
    assert not access & set(re.findall(r"-var=(\w+)=", deploy))  # never given on the command line


def test_the_migrate_step_runs_as_the_schema_owner_and_the_functions_never_migrate(build, tf):
    migrate = next(s for s in build["steps"] if s["id"] == "migrate")
    env = dict(e.split("=", 1) for e in migrate["env"])
    assert env["GLEANER_DATABASE_ROLE"] == "${_DB_OWNER_ROLE}"
    assert build["substitutions"]["_DB_OWNER_ROLE"] == tf["variable"]["database_owner_role"]["default"]
    assert env["GLEANER_CLOUDSQL_USER"].startswith("gl-builder@")
    assert tf["resource"]["google_service_account"]["builder"]["account_id"] == "gl-builder"
    assert "gleaner db upgrade" in " ".join(migrate["args"])
    assert tf["locals"]["common_env"]["GLEANER_AUTO_MIGRATE"] == "false"
    assert tf["variable"]["database_role"]["default"] != tf["variable"]["database_owner_role"]["default"]


def test_every_file_a_build_step_names_exists(build):
    for step in build["steps"]:
        text = " ".join(map(str, step.get("args", [])))
        for path in re.findall(r"(?<![\w./-])((?:infra|tests|terraform|functions|shared)(?:/[\w.-]+)*)", text):
            assert (ROOT / path).exists(), f"step {step['id']} names {path}, which does not exist"


def test_every_substitution_the_build_uses_is_defined(build):
    builtin = {"PROJECT_ID", "BUILD_ID", "SHORT_SHA", "COMMIT_SHA", "REPO_NAME", "BRANCH_NAME", "TAG_NAME",
               "LOCATION", "PROJECT_NUMBER"}
    used = set(re.findall(r"\$\{(\w+)\}", (ROOT / "cloudbuild.yaml").read_text()))
    assert used - builtin <= set(build["substitutions"])


def test_the_deploy_step_sets_every_required_terraform_variable_and_only_real_ones(build, tf):
    deploy = " ".join(next(s for s in build["steps"] if s["id"] == "deploy")["args"])
    passed = set(re.findall(r"-var=(\w+)=", deploy)) | {"archives"}  # from the -var-file
    required = {name for name, spec in tf["variable"].items() if "default" not in spec}
    assert required <= passed <= set(tf["variable"])


def test_the_upload_lands_where_terraform_reads_the_archives_and_skips_known_ones(build):
    import package_functions

    upload = " ".join(next(s for s in build["steps"] if s["id"] == "upload")["args"])
    assert f"gs://${{_SOURCE_BUCKET}}/{package_functions.OBJECT_PREFIX}" in upload and "--no-clobber" in upload
    deploy = " ".join(next(s for s in build["steps"] if s["id"] == "deploy")["args"])
    assert "-var=source_bucket=${_SOURCE_BUCKET}" in deploy
    assert "-var-file=../dist/functions/archives.tfvars.json" in deploy


def test_packaging_vendors_the_package_beside_each_entry_point_named_by_content(tmp_path):
    import package_functions

    assert package_functions.main(["--out", str(tmp_path)]) == 0
    archives = json.loads((tmp_path / "archives.tfvars.json").read_text())["archives"]
    assert set(archives) == set(emulators.entry_points())
    for stage, entries in emulators.entry_points().items():
        path = tmp_path / archives[stage].removeprefix(package_functions.OBJECT_PREFIX)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        assert path.name == f"{stage}-{digest}.zip"
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            assert {"main.py", "requirements.txt", "gleaner/__init__.py", "gleaner/cloud/entry.py",
                    "gleaner/migrations/versions/0001_knowledge_core.py"} <= names
            assert not any("__pycache__" in n for n in names)
            tree = ast.parse(archive.read("main.py"))
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert set(entries) <= defined
            assert archive.read("requirements.txt") == package_functions.LOCK.read_bytes()
    again = tmp_path / "again"
    package_functions.main(["--out", str(again)])
    # Same source, same names: nothing is uploaded or redeployed again.
    assert json.loads((again / "archives.tfvars.json").read_text())["archives"] == archives


def test_the_functions_lock_pins_every_runtime_requirement_with_hashes():
    import package_functions
    from packaging.requirements import Requirement

    pins = package_functions.locked()
    for line in package_functions.requirements():
        requirement = Requirement(line)
        name = package_functions._name(requirement.name)
        assert name in pins, f"{name} is not in infra/functions.lock: python infra/package_functions.py --relock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    assert "pgserver" not in pins and {"functions-framework", "google-cloud-pubsub"} <= set(pins)
    text = package_functions.LOCK.read_text()
    pinned = [line for line in text.splitlines() if "==" in line and not line.startswith((" ", "#"))]
    assert len(pinned) == len(pins) and text.count("--hash=sha256:") >= len(pins)
    assert "--find-links" not in text and "--index-url" not in text  # nothing of this machine leaks in


# -- a first deploy on a fresh project (issue 14) --------------------------------------------------

_LOCAL_REF = re.compile(r'local\.([a-z_]+)((?:\["[^"]+"\])*)((?:\.[a-z_]+)*)')


def _evaluate(tf: dict[str, Any], expression: str) -> Any:
    """A number from a small HCL expression over locals and variable defaults (arithmetic only)."""
    expression = expression.strip()
    if expression.startswith("${") and expression.endswith("}"):
        expression = expression[2:-1]
    expression = re.sub(r"^tostring\((.*)\)$", r"\1", expression)

    def value(match: re.Match[str]) -> str:
        found: Any = tf["locals"][match.group(1)]
        for key in re.findall(r'\["([^"]+)"\]', match.group(2)):
            found = found[key]
        for attribute in filter(None, match.group(3).split(".")):
            found = found[attribute]
        return str(_evaluate(tf, found) if isinstance(found, str) else found)

    expression = _LOCAL_REF.sub(value, expression)
    expression = re.sub(r"var\.([a-z_]+)", lambda m: str(tf["variable"][m.group(1)]["default"]), expression)
    if not re.fullmatch(r"[\d\s+\-*/().]+", expression):
        raise ValueError(f"cannot evaluate {expression!r}")
    return eval(expression)


def _function_env(tf: dict[str, Any], name: str) -> dict[str, str]:
    """What a deployed function's environment holds, references replaced by stand-in values."""
    env: dict[str, str] = {}
    knows_scrape_url = {*tf["locals"]["enqueues_scrape"], *tf["locals"]["schedules_deliveries"]}
    extra = dict(tf["locals"]["tasks_env"]) if name in knows_scrape_url else {}
    if _functions(tf)[name]["concurrency"] > 1:  # local.concurrent_env, as its for-expression builds it
        extra.update(THREADS=str(_functions(tf)[name]["concurrency"]),
                     GLEANER_DB_POOL_SIZE=str(tf["locals"]["db_concurrent_pool_size"]),
                     GLEANER_DB_MAX_OVERFLOW=str(tf["locals"]["db_concurrent_max_overflow"]))
    secrets = {"GLEANER_ERASURE_KEY": "00" * 32}  # from Secret Manager (secret_environment_variables)
    for key, raw in {**tf["locals"]["common_env"], **extra, "GLEANER_CLOUDSQL_USER": "${…}", **secrets}.items():
        raw = str(raw)
        try:
            env[key] = str(_evaluate(tf, raw))
        except (ValueError, KeyError, TypeError, SyntaxError):
            env[key] = re.sub(r"\$\{[^}]*\}", "x", raw)
    return env


def test_every_function_gets_the_settings_the_cloud_path_needs(tf):
    for name in _functions(tf):
        settings = Settings.from_env(_function_env(tf, name))
        assert settings.bus == "gcp" and settings.project
        assert settings.blob_url and settings.blob_url.startswith("gs://")
        assert settings.cloudsql_instance and settings.cloudsql_user and settings.database_role
        assert settings.http_auth is HttpAuth.IAM  # no public invoker: Cloud Run checked the caller
        assert settings.shared_politeness and not settings.auto_migrate
        assert settings.max_delivery_attempts == tf["variable"]["max_delivery_attempts"]["default"]
        assert 0 < settings.scrape_soft_deadline < _functions(tf)["scrape"]["timeout"]
    # sample enqueues batches, scrape the remainder it hands on, others webhook deliveries (to notify)
    for name in {"sample", "scrape", *tf["locals"]["schedules_deliveries"]}:
        settings = Settings.from_env(_function_env(tf, name))
        assert settings.scrape_url and settings.tasks_service_account
        assert settings.notify_task_url  # local.notify_url (test_deliveries_have_their_own_function…)
        assert settings.notify_max_attempts == tf["variable"]["notify_max_attempts"]["default"]
    assert set(tf["locals"]["enqueues_scrape"]) == {"sample", "scrape"}


def test_nothing_is_granted_to_all_users():
    for path in TERRAFORM.glob("*.tf"):
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
        assert '"allUsers"' not in code.replace('["allUsers", "allAuthenticatedUsers"]', ""), path.name
        assert '"allAuthenticatedUsers"' not in code.replace('["allUsers", "allAuthenticatedUsers"]', ""), path.name


def test_the_database_names_the_edition_its_custom_tier_needs(tf):
    settings = tf["resource"]["google_sql_database_instance"]["main"]["settings"][0]
    assert tf["variable"]["db_tier"]["default"].startswith("db-custom-")
    assert settings["edition"] == "ENTERPRISE"  # PostgreSQL 16 defaults to ENTERPRISE_PLUS, which refuses db-custom-*
    flags = {f["name"]: f["value"] for f in settings["database_flags"]}
    assert flags["max_connections"] == "${tostring(var.db_max_connections)}"


# The API each resource type calls (a new resource type must be added here, and its API enabled).
_API_OF = {
    "google_cloudfunctions2_function": {"cloudfunctions", "run", "cloudbuild", "artifactregistry", "compute"},
    "google_artifact_registry_repository": {"artifactregistry"},
    "google_artifact_registry_repository_iam_member": {"artifactregistry"},
    "time_sleep": set(),  # the time provider: no Google API
    "google_cloud_run_service_iam_member": {"run"},
    "google_cloud_run_v2_service": {"run"},  # the render service (render.tf)
    "google_cloud_run_v2_service_iam_member": {"run"},
    "google_pubsub_topic": {"pubsub"}, "google_pubsub_subscription": {"pubsub"},
    "google_pubsub_topic_iam_member": {"pubsub"}, "google_pubsub_subscription_iam_member": {"pubsub"},
    "google_cloud_tasks_queue": {"cloudtasks"}, "google_cloud_tasks_queue_iam_member": {"cloudtasks"},
    "google_cloud_scheduler_job": {"cloudscheduler", "iamcredentials"},
    "google_sql_database_instance": {"sqladmin"}, "google_sql_database": {"sqladmin"}, "google_sql_user": {"sqladmin"},
    "google_secret_manager_secret_iam_member": {"secretmanager"}, "google_secret_manager_secret": {"secretmanager"},
    "google_storage_bucket": {"storage"}, "google_storage_bucket_iam_member": {"storage"},
    "google_service_account": {"iam"}, "google_service_account_iam_member": {"iam", "iamcredentials"},
    "google_project_iam_custom_role": {"iam"}, "google_project_iam_member": {"cloudresourcemanager"},
    "google_project": {"cloudresourcemanager"}, "google_project_service_identity": {"serviceusage"},
    "google_logging_metric": {"logging"}, "google_monitoring_alert_policy": {"monitoring"},
    "google_project_service": {"serviceusage"},
}


def test_every_api_the_resources_call_is_enabled_by_terraform(tf):
    enabled = {api.removesuffix(".googleapis.com") for api in tf["locals"]["apis"]}
    used = {*tf["resource"], *tf["data"]}
    unknown = used - set(_API_OF)
    assert not unknown, f"add the API of {unknown} to _API_OF (and to locals.apis)"
    needed: set[str] = set().union(*(_API_OF[t] for t in used))
    assert needed <= enabled, needed - enabled
    assert "cloudresourcemanager" in enabled


def test_resources_that_reference_nothing_wait_for_the_apis(tf):
    """A resource with no reference to another managed resource would be created before its API is on."""
    for kind in ("resource", "data"):
        for rtype, named in tf[kind].items():
            if rtype == "google_project_service":
                continue
            for name, block in named.items():
                text = json.dumps(block)
                refers = re.search(r"\$\{[^}]*\b(google_[a-z0-9_]+\.|local\.(?!apis\b))", text)
                waits = "google_project_service.enabled" in " ".join(block.get("depends_on", []) or [])
                assert refers or waits, f"{kind} {rtype}.{name} neither references a resource nor depends on the APIs"


def test_the_pubsub_agent_exists_before_it_is_granted_anything(tf):
    assert tf["locals"]["pubsub_agent"] == "serviceAccount:${google_project_service_identity.pubsub.email}"
    identity = tf["resource"]["google_project_service_identity"]["pubsub"]
    assert identity["service"] == "pubsub.googleapis.com" and identity["provider"] == "google-beta"


def test_scheduler_jobs_prove_their_identity_with_oidc_and_carry_no_secret(tf):
    jobs = tf["resource"]["google_cloud_scheduler_job"]
    http_jobs = {name: job for name, job in jobs.items() if "http_target" in job}
    assert set(http_jobs) == {"operator"}
    for job in http_jobs.values():
        target = job["http_target"][0]
        assert "Authorization" not in target.get("headers", {})
        assert target["oidc_token"][0]["service_account_email"] == "${google_service_account.scheduler.email}"
        assert target["oidc_token"][0]["audience"] == target["uri"] == "${local.map_http_uri}"
    assert "google_secret_manager_secret_version" not in tf["data"]  # its value would land in the state
    invokers = tf["resource"]["google_cloud_run_service_iam_member"]
    assert invokers["scheduler_to_map"]["member"] == "serviceAccount:${google_service_account.scheduler.email}"


def test_tick_and_sweep_are_scheduled_on_map_http(tf):
    operator = tf["locals"]["operator_jobs"]
    assert operator["tick"]["body"] == {"tick": True}
    assert operator["sweep"]["body"] == {"sweep": True}
    assert operator["index"]["body"] == {"index": True}  # the vector graph's upkeep: crawls never merge
    assert tf["locals"]["map_http_uri"] == '${google_cloudfunctions2_function.http["map-http"].service_config[0].uri}'
    assert (_functions(tf)["map-http"]["stage"], _functions(tf)["map-http"]["entry_point"]) == ("map", "on_http")


def test_the_connection_budget_fits_the_databases_max_connections(tf):
    functions = _functions(tf)
    per_instance = tf["locals"]["db_pool_size"] + tf["locals"]["db_max_overflow"]
    shared = tf["locals"]["db_concurrent_pool_size"] + tf["locals"]["db_concurrent_max_overflow"]
    peak = sum(f["max_instances"] * (shared if f["concurrency"] > 1 else per_instance) for f in functions.values())
    # The render service's Fetchers use the database too (robots.txt answers, budget, host turns).
    render_peak = tf["variable"]["render_max_instances"]["default"] * per_instance
    total = peak + render_peak + tf["locals"]["db_migrator"] + tf["locals"]["db_headroom"]
    assert total <= tf["variable"]["db_max_connections"]["default"] - tf["locals"]["db_reserved"]
    assert tf["locals"]["db_functions"] == "${keys(local.all_functions)}"
    precondition = tf["resource"]["google_sql_database_instance"]["main"]["lifecycle"][0]["precondition"][0]
    assert precondition["condition"] == "${local.db_connections <= var.db_max_connections - local.db_reserved}"
    assert tf["locals"]["db_connections"] == \
        "${local.db_peak + local.render_db_peak + local.db_migrator + local.db_headroom}"
    assert tf["locals"]["render_db_peak"] == \
        "${local.render_enabled ? var.render_max_instances * local.db_per_instance : 0}"
    # The functions' pools are the ones the budget counts.
    settings = Settings.from_env(_function_env(tf, "map"))
    assert (settings.db_pool_size, settings.db_max_overflow) == (tf["locals"]["db_pool_size"],
                                                                 tf["locals"]["db_max_overflow"])
    settings = Settings.from_env(_function_env(tf, "scrape"))
    assert (settings.db_pool_size, settings.db_max_overflow) == (tf["locals"]["db_concurrent_pool_size"],
                                                                 tf["locals"]["db_concurrent_max_overflow"])
    assert "local.db_instance_connections[name]" in tf["locals"]["db_peak"]
    assert all(f["max_instances"] >= 1 for f in functions.values())


def test_log_based_metrics_count_events_the_code_logs_and_alerts_watch_backlog_age_and_stuck_runs(tf):
    events = {e["event"] for e in tf["locals"]["event_counts"].values()} | {"scrape-batch"}
    assert events <= {e.value for e in Event}
    assert {"dead-letter", "task-gave-up", "run-swept"} <= events
    assert {"pages_fetched", "pages_failed"} <= set(tf["locals"]["page_counts"])
    alerts = tf["resource"]["google_monitoring_alert_policy"]
    assert {"dead_letter_backlog", "oldest_unacked", "stuck_runs"} <= set(alerts)
    backlog = alerts["dead_letter_backlog"]["conditions"][0]["condition_threshold"][0]["filter"]
    assert "num_undelivered_messages" in backlog and "dead_letter_hold" in backlog
    oldest = alerts["oldest_unacked"]["conditions"][0]["condition_threshold"][0]["filter"]
    assert "oldest_unacked_message_age" in oldest


def test_the_builder_deploys_with_a_custom_role_and_no_basic_roles(tf):
    role = tf["resource"]["google_project_iam_custom_role"]["deployer"]
    assert role["permissions"] == "${local.deployer_permissions}"
    permissions = tf["locals"]["deployer_permissions"]
    assert "pubsub.topics.setIamPolicy" in permissions and "cloudtasks.queues.setIamPolicy" in permissions
    assert "secretmanager.versions.access" not in permissions  # the deployer never reads the secret
    grants = tf["resource"]["google_project_iam_member"]
    assert grants["builder_deploys"]["role"] == "${google_project_iam_custom_role.deployer.id}"
    text = "\n".join(p.read_text() for p in TERRAFORM.glob("*.tf"))
    assert not re.search(r'"roles/(editor|owner)"', text)


def test_every_function_reads_the_same_erasure_key_from_secret_manager(tf):
    functions = tf["resource"]["google_cloudfunctions2_function"]
    for kind in ("http", "event"):
        config = functions[kind]["service_config"][0]
        keys = [block["key"] for block in config.get("secret_environment_variables", [])]
        assert "GLEANER_ERASURE_KEY" in keys, kind  # unset in the cloud, erasure refuses to run
    grants = tf["resource"]["google_secret_manager_secret_iam_member"]["erasure_key"]
    assert grants["for_each"] == "${toset(local.db_functions)}"


def test_the_back_office_is_its_own_function_behind_its_own_invokers(tf):
    backoffice = tf["locals"]["http_functions"]["backoffice"]
    assert (backoffice["stage"], backoffice["entry_point"]) == ("backoffice", "on_http")
    assert "backoffice" in tf["locals"]["secret_functions"] and tf["locals"]["publishes"]["backoffice"] == []
    binding = tf["resource"]["google_cloud_run_service_iam_member"]["backoffice_invokers"]
    assert binding["for_each"] == "${toset(var.backoffice_invokers)}"
    assert binding["service"] == '${google_cloudfunctions2_function.http["backoffice"].name}'
    assert tf["variable"]["backoffice_invokers"]["default"] == []
    # Nobody else may invoke it: every other invoker binding names another function.
    for name, other in tf["resource"]["google_cloud_run_service_iam_member"].items():
        if name != "backoffice_invokers":
            assert "backoffice" not in str(other.get("service", "")), name


# -- a first deploy that does not stop part-way (issue 29) ------------------------------------------


def _references(block: Any, kind: str) -> set[str]:
    """The names of ``kind`` resources a block refers to (``kind.name``)."""
    return set(re.findall(rf"\b{kind}\.([a-z0-9_]+)\b", json.dumps(block)))


def test_every_alert_on_a_log_based_metric_waits_for_the_metric_to_propagate(tf):
    """Monitoring refuses an alert on a log-based metric created minutes before ("Cannot find metric(s)")."""
    sleeps = tf["resource"].get("time_sleep", {})
    checked = 0
    for name, policy in tf["resource"]["google_monitoring_alert_policy"].items():
        metrics = _references(policy, "google_logging_metric")
        if "logging.googleapis.com/user/" not in json.dumps(policy):
            continue
        assert metrics, f"alert {name} names a log-based metric Terraform does not manage"
        depends = [d.removeprefix("${").removesuffix("}") for d in policy.get("depends_on", [])]
        delays = {d.split(".", 1)[1] for d in depends if d.startswith("time_sleep.")}
        assert delays, f"alert {name} on {metrics} is created without waiting for them"
        waited = set().union(*(_references(sleeps[d], "google_logging_metric") for d in delays))
        assert metrics <= waited, f"alert {name}: the delay does not come after {metrics - waited}"
        for delay in delays:
            seconds = int(sleeps[delay]["create_duration"].rstrip("s"))
            assert seconds >= 600, f"{delay} waits {seconds}s; propagation can take ten minutes"
        checked += 1
    assert checked >= 1  # stuck_runs alerts on runs_stuck and tasks_gave_up


def test_every_function_is_built_by_its_own_build_identity_into_a_repository_that_is_cleaned(tf):
    functions = tf["resource"]["google_cloudfunctions2_function"]
    for kind in ("http", "event"):
        build = functions[kind]["build_config"][0]
        assert build.get("service_account") == "${google_service_account.function_build.id}", kind
        assert build.get("docker_repository") == "${google_artifact_registry_repository.functions.id}", kind
        # The grants exist before the first build uses them.
        depends = " ".join(functions[kind]["depends_on"])
        assert "google_project_iam_member.function_build" in depends and \
            "google_artifact_registry_repository_iam_member.function_build" in depends
    roles = tf["resource"]["google_project_iam_member"]["function_build"]["for_each"]
    assert "roles/logging.logWriter" in roles and "roles/storage.objectViewer" in roles
    writer = tf["resource"]["google_artifact_registry_repository_iam_member"]["function_build"]
    assert writer["role"] == "roles/artifactregistry.writer"
    repository = tf["resource"]["google_artifact_registry_repository"]["functions"]
    assert repository["cleanup_policy_dry_run"] is False
    actions = {p["action"] for p in repository["cleanup_policies"]}
    assert actions == {"KEEP", "DELETE"}
    assert {"artifactregistry.repositories.create", "artifactregistry.repositories.setIamPolicy"} <= \
        set(tf["locals"]["deployer_permissions"])


# Call sites in the code that create Cloud Tasks, and the queue setting each one enqueues on.
_ENQUEUES = {"enqueue": "tasks_queue", "flush_after_commit": "notify_queue", "flush": "notify_queue"}
SHARED = ROOT / "shared"


def _module(path: Path) -> str:
    return ".".join(path.relative_to(SHARED).with_suffix("").parts)


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _queue_call_sites() -> dict[str, set[str]]:
    """Module -> the queue settings its code enqueues on (``deps.bus.enqueue``, the outbox's flush)."""
    sites: dict[str, set[str]] = {}
    for path in (SHARED / "gleaner").rglob("*.py"):
        if path.parent.name in ("bus", "cli", "migrations") or path.name in ("outbox.py", "runner.py"):
            continue  # the port and its adapters, the laptop's CLI and engine (no function runs them), the outbox
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ENQUEUES:
                target = ast.unparse(node.func.value)
                if target.endswith("bus") or target == "outbox":
                    sites.setdefault(_module(path), set()).add(_ENQUEUES[node.func.attr])
    return sites


def _stage_modules() -> dict[str, set[str]]:
    """Stage -> the modules its handler runs: the handler's module and the gleaner modules it imports."""
    modules: dict[str, set[str]] = {}
    for _topic, (stage, _cls, handler) in STAGES.items():
        own = handler.__module__
        path = SHARED / (own.replace(".", "/") + ".py")
        modules.setdefault(stage, set()).update({own, *(m for m in _imports(ast.parse(path.read_text()))
                                                       if m.startswith("gleaner."))})
    # scrape's Cloud Tasks entry takes the batch's site slot before the handler and wakes a waiter after it.
    entry = ast.parse((SHARED / "gleaner" / "cloud" / "taskentry.py").read_text())
    modules["scrape"].update(m for m in _imports(entry) if m.startswith("gleaner."))
    return modules


def _bound(tf: dict[str, Any], for_each: str) -> set[str]:
    match = re.fullmatch(r"\$\{toset\(local\.([a-z_]+)\)\}", for_each)
    assert match, for_each
    return set(tf["locals"][match.group(1)])


def test_every_queue_a_function_enqueues_on_lets_it_create_tasks(tf):
    """Read from the code (who calls the bus's enqueue or flushes the outbox) and terraform's bindings."""
    sites = _queue_call_sites()
    assert {"gleaner.stages.sample", "gleaner.stages.scrape", "gleaner.stages.snapshot"} <= set(sites)
    stages = _stage_modules()
    unrun = set(sites) - set().union(*stages.values())
    assert not unrun, f"{unrun} create tasks but no stage runs them: say which function does"
    # The functions that run a stage's handler: the Pub/Sub-fed ones, and the Cloud Tasks target.
    tasks_targets = {m.group(1) for binding in tf["resource"]["google_cloud_run_service_iam_member"].values()
                     if "tasks_invoker" in binding["member"]
                     for m in re.finditer(r'http\["([a-z-]+)"\]', binding["service"])}
    assert tasks_targets == {"scrape", "notify"}
    runners = {name: f["stage"] for name, f in _functions(tf).items()
               if f["entry_point"] == "on_event" or name == "scrape"}
    defaults = Settings()
    queues = {q["name"]: key for key, q in tf["resource"]["google_cloud_tasks_queue"].items()}
    grants: dict[str, set[str]] = {}
    for binding in tf["resource"]["google_cloud_tasks_queue_iam_member"].values():
        if binding["role"] != "roles/cloudtasks.enqueuer":
            continue
        queue = re.fullmatch(r"\$\{google_cloud_tasks_queue\.([a-z_]+)\.id\}", binding["name"]).group(1)
        grants.setdefault(queue, set()).update(_bound(tf, binding["for_each"]))
    needed: set[tuple[str, str]] = set()
    for function, stage in runners.items():
        for module, settings in sites.items():
            if module in stages[stage]:
                needed.update((function, getattr(defaults, s)) for s in settings)
    assert ("scrape", defaults.notify_queue) in needed  # scrape flushes the outbox (issue 29)
    missing = {(fn, queue) for fn, queue in needed if fn not in grants.get(queues[queue], set())}
    assert not missing, f"these functions enqueue on these queues without cloudtasks.enqueuer: {missing}"
    # And may attach the tasks identity to the tasks they create.
    acts_as = tf["resource"]["google_service_account_iam_member"]
    may_act = _bound(tf, acts_as["acts_as_tasks_invoker"]["for_each"]) | \
        _bound(tf, acts_as["acts_as_tasks_invoker_for_deliveries"]["for_each"])
    assert {fn for fn, _ in needed} <= may_act


def test_the_functions_that_delete_scrape_tasks_may_delete_them_and_nothing_more(tf):
    """Read from the code (who calls the bus's cancel) and terraform's bindings."""
    callers = set()
    for path in (SHARED / "gleaner").rglob("*.py"):
        if path.parent.name in ("bus", "cli", "migrations"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cancel" \
                    and ast.unparse(node.func.value).endswith("bus"):
                callers.add(_module(path))
    assert callers == {"gleaner.cloud.siteleases"}  # a finishing holder deletes its waiter's delayed task
    assert callers <= _stage_modules()["scrape"]
    deleters = [b for b in tf["resource"]["google_cloud_tasks_queue_iam_member"].values()
                if b["role"] == "roles/cloudtasks.taskDeleter"]
    assert [b["name"] for b in deleters] == ["${google_cloud_tasks_queue.scrape.id}"]
    assert _bound(tf, deleters[0]["for_each"]) == {"scrape"}


def test_scrape_stops_fetching_with_room_for_queueing_a_cold_start_and_finishing(tf):
    from gleaner.bus.gcp import TASK_DISPATCH_DEADLINE_SECONDS

    soft = Settings.from_env(_function_env(tf, "scrape")).scrape_soft_deadline
    assert _functions(tf)["scrape"]["timeout"] == TASK_DISPATCH_DEADLINE_SECONDS
    assert TASK_DISPATCH_DEADLINE_SECONDS - soft >= 600


def test_maps_walk_ends_inside_its_functions_timeout(tf):
    """A Pub/Sub-fed function killed at its timeout is redelivered from the start: the walk must end first."""
    walk = Settings.from_env(_function_env(tf, "map")).map_soft_deadline
    assert 0 < walk <= _functions(tf)["map"]["timeout"] - 120
    assert Settings().map_soft_deadline == 0  # a laptop's walk has no function timeout to fit in


def _render_tag_script(build: dict[str, Any]) -> str:
    """The render-tag step's script as Cloud Build runs it: substitutions made, ``$$`` a literal ``$``."""
    values = {**build["substitutions"], "PROJECT_ID": "proj", "_REGION": "europe-west1"}
    text = " ".join(next(s for s in build["steps"] if s["id"] == "render-tag")["args"][1:])
    text = re.sub(r"(?<!\$)\$\{(\w+)\}", lambda m: str(values[m.group(1)]), text)
    return text.replace("$$", "$")


def _run_render_tag(build: dict[str, Any], tmp_path: Path, *, repository: bool, image: bool) -> Path:
    """Run the step in a copy of what it hashes, with a gcloud that knows the repository and image or not."""
    work = tmp_path / "src"
    shutil.copytree(ROOT / "shared", work / "shared", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (work / "infra" / "render").mkdir(parents=True)
    shutil.copy(ROOT / "infra" / "render" / "Dockerfile", work / "infra" / "render" / "Dockerfile")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, work / name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text("#!/bin/sh\necho \"$@\" >> \"$GCLOUD_LOG\"\ncase \"$2\" in\n"
                                    f"  repositories) exit {0 if repository else 1};;\n"
                                    f"  docker) exit {0 if image else 1};;\nesac\n")
    (bin_dir / "gcloud").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GCLOUD_LOG": str(tmp_path / "gcloud.log")}
    subprocess.run(["bash", "-c", _render_tag_script(build)], cwd=work, env=env, check=True,
                   capture_output=True, timeout=60)
    return work


def test_the_build_tags_the_render_image_by_its_inputs_and_builds_it_only_when_new(build, tmp_path):
    work = _run_render_tag(build, tmp_path / "a", repository=True, image=False)
    image = json.loads((work / "dist" / "render.tfvars.json").read_text())["render_image"]
    repository = build["substitutions"]["_RENDER_REPOSITORY"]
    assert re.fullmatch(rf"europe-west1-docker\.pkg\.dev/proj/{repository}/render:[0-9a-f]{{20}}", image)
    assert (work / "dist" / "render" / "build").exists()  # a new tag: the next step builds and pushes it
    # The same inputs name the same tag; an existing tag is not built again.
    again = _run_render_tag(build, tmp_path / "b", repository=True, image=True)
    assert json.loads((again / "dist" / "render.tfvars.json").read_text())["render_image"] == image
    assert not (again / "dist" / "render" / "build").exists()
    # Any change to what goes into the image is a new tag.
    changed = tmp_path / "c"
    shutil.copytree(work, changed, ignore=shutil.ignore_patterns("dist"))
    (changed / "shared" / "gleaner" / "render" / "browser.py").write_text("# changed\n")
    subprocess.run(["bash", "-c", _render_tag_script(build)], cwd=changed, check=True, capture_output=True,
                   env={"PATH": f"{tmp_path / 'a' / 'bin'}:/usr/bin:/bin", "GCLOUD_LOG": str(tmp_path / "log")},
                   timeout=60)
    assert json.loads((changed / "dist" / "render.tfvars.json").read_text())["render_image"] != image
    # The build step pushes exactly that image before the deploy step applies it.
    render_image = " ".join(next(s for s in build["steps"] if s["id"] == "render-image")["args"])
    assert "docker build -f infra/render/Dockerfile" in render_image and "docker push" in render_image
    deploy = " ".join(next(s for s in build["steps"] if s["id"] == "deploy")["args"])
    assert deploy.index("archives.tfvars.json") < deploy.index("-var-file=../dist/render.tfvars.json")


def test_without_the_render_repository_the_build_leaves_the_render_image_as_the_settings_say(build, tmp_path):
    work = _run_render_tag(build, tmp_path, repository=False, image=False)
    assert json.loads((work / "dist" / "render.tfvars.json").read_text()) == {}
    assert not (work / "dist" / "render" / "build").exists()


def test_the_render_repository_is_the_one_the_build_pushes_to_and_the_builder_may_write_it(build, tf):
    repository = tf["resource"]["google_artifact_registry_repository"]["render"]
    assert repository["repository_id"] == "${var.render_repository}"
    assert tf["variable"]["render_repository"]["default"] == build["substitutions"]["_RENDER_REPOSITORY"]
    assert "count" not in repository  # the build needs it before the first image exists
    writer = tf["resource"]["google_artifact_registry_repository_iam_member"]["render_build"]
    assert writer["role"] == "roles/artifactregistry.writer"
    assert writer["member"] == "serviceAccount:${google_service_account.builder.email}"
    assert {a["action"] for a in repository["cleanup_policies"]} == {"KEEP", "DELETE"}
    # The builder deploys the render service itself (no function's service agent does it for it).
    assert {"run.services.create", "run.services.update", "run.services.delete"} <= \
        set(tf["locals"]["deployer_permissions"])


def test_scrape_serves_several_batches_per_instance_with_a_vcpu_and_threads_for_each(tf):
    fn = tf["resource"]["google_cloudfunctions2_function"]["http"]["service_config"][0]
    assert fn["max_instance_request_concurrency"] == "${each.value.concurrency}"
    assert fn["available_cpu"] == "1"  # a concurrency above 1 needs a whole vCPU (FACTS.md)
    assert "lookup(local.concurrent_env, each.key, {})" in fn["environment_variables"]
    scrape, notify = _functions(tf)["scrape"], _functions(tf)["notify"]
    assert scrape["concurrency"] > 1 and notify["concurrency"] > 1
    assert set(tf["locals"]["db_concurrent"].split("if")[1:]) and "f.concurrency > 1" in tf["locals"]["db_concurrent"]
    # functions-framework serves as many requests at once as it has threads (default: 4 per vCPU).
    assert Settings.from_env(_function_env(tf, "scrape")).db_pool_size == tf["locals"]["db_concurrent_pool_size"]
    assert _function_env(tf, "scrape")["THREADS"] == str(scrape["concurrency"])
    # Stages that were written for one request at a time stay there.
    assert all(f["concurrency"] == 1 for f in tf["locals"]["event_functions"].values())


def test_deliveries_have_their_own_function_which_only_the_tasks_identity_invokes(tf):
    notify = _functions(tf)["notify"]
    assert (notify["stage"], notify["entry_point"], notify["external"]) == ("notify", "on_http", False)
    assert ("notify", "on_http") in {(s, e) for s, entries in emulators.entry_points().items() for e in entries}
    invoker = tf["resource"]["google_cloud_run_service_iam_member"]["tasks_to_notify"]
    assert invoker["service"] == '${google_cloudfunctions2_function.http["notify"].name}'
    assert invoker["member"] == "serviceAccount:${google_service_account.tasks_invoker.email}"
    assert tf["locals"]["notify_url"].startswith("https://gleaner-notify-")
    assert tf["locals"]["tasks_env"]["GLEANER_NOTIFY_TASK_URL"] == "${local.notify_url}"
    assert tf["locals"]["publishes"]["notify"] == []
    # The queue dispatches no more at once than notify serves: a 429 would spend a delivery's attempt.
    dispatch = tf["resource"]["google_cloud_tasks_queue"]["notify"]["rate_limits"][0]["max_concurrent_dispatches"]
    assert dispatch <= notify["max_instances"] * notify["concurrency"]
    # The queue's deliveries reach notify's entry point, never scrape's instances.
    from gleaner.bus.gcp import notify_task_url

    settings = Settings.from_env(_function_env(tf, "snapshot"))
    assert notify_task_url(settings) == settings.notify_task_url and not notify_task_url(settings).endswith("/deliver")


def test_how_long_an_erased_row_stays_in_cloud_sql_backups_and_pitr_is_bounded_by_variables(tf):
    backups = tf["resource"]["google_sql_database_instance"]
    (instance,) = backups.values()
    settings = instance["settings"][0] if isinstance(instance["settings"], list) else instance["settings"]
    config = settings["backup_configuration"]
    config = config[0] if isinstance(config, list) else config
    assert config["transaction_log_retention_days"] == "${var.db_log_retention_days}"
    retention = config["backup_retention_settings"]
    retention = retention[0] if isinstance(retention, list) else retention
    assert retention["retained_backups"] == "${var.db_retained_backups}"
    assert 1 <= tf["variable"]["db_log_retention_days"]["default"] <= 7
    # Blob objects are never versioned: a deleted body is gone, no noncurrent version outlives the erasure.
    assert tf["resource"]["google_storage_bucket"]["blobs"]["versioning"][0]["enabled"] is False
