"""A first Cloud SQL deploy's database steps, replayed on a PostgreSQL laid out as Cloud SQL lays it out.

Cloud SQL's ``postgres`` user is no superuser: it has CREATEROLE and CREATEDB, the database belongs
to it, and each IAM database user Terraform creates is a plain LOGIN role. On such a cluster this
module runs what docs/deployment.md tells a person to run, taken from the deployment's own text:

1. the bootstrap SQL, rendered from ``terraform/db_bootstrap.sql.tftpl`` with the values
   ``terraform/outputs.tf`` passes it (names resolved from the Terraform files), run with psql as
   the admin, as ``gcloud sql connect`` would;
2. the migrate step of ``cloudbuild.yaml`` with that step's own environment: the build's IAM login
   and the schema owner role (the connector's login replaced by a direct one of the same user);
3. then the tests act as a function's IAM user with the role Terraform gives every function.

The same functions let a test feed an older bootstrap script in, to show the rehearsal catches it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import hcl2
import yaml

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM = ROOT / "terraform"
PROJECT = "rehearsal-project"
ADMIN = "cloudsql_postgres"  # Cloud SQL's postgres user: CREATEROLE, CREATEDB, no superuser


def _strip(value: Any) -> Any:
    """python-hcl2 keeps HCL's quotes on strings and keys; strip them and its bookkeeping keys."""
    if isinstance(value, dict):
        return {_strip(k): _strip(v) for k, v in value.items() if k not in ("__comments__", "__is_block__")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def terraform() -> dict[str, Any]:
    merged: dict[str, Any] = {"locals": {}, "resource": {}, "variable": {}, "output": {}}
    for path in sorted(TERRAFORM.glob("*.tf")):
        parsed = _strip(hcl2.loads(path.read_text()))
        for block in parsed.get("locals", []):
            merged["locals"].update(block)
        for block in parsed.get("resource", []):
            for rtype, named in block.items():
                merged["resource"].setdefault(rtype, {}).update(named)
        for kind in ("variable", "output"):
            for block in parsed.get(kind, []):
                merged[kind].update(block)
    return merged


def _iam_user(tf: dict[str, Any], account: Mapping[str, Any]) -> str:
    """The IAM database user name of a service account (google_sql_user: the email minus the suffix)."""
    return f"{account['account_id']}@{PROJECT}.iam"


def _function_keys(tf: dict[str, Any]) -> list[str]:
    return [*tf["locals"]["http_functions"], *tf["locals"]["event_functions"]]


def _resolve(tf: dict[str, Any], expression: str) -> Any:
    """The value of one of the few reference forms the bootstrap template's arguments use."""
    expression = expression.strip().removeprefix("${").removesuffix("}").strip()
    if m := re.fullmatch(r"var\.(\w+)", expression):
        return tf["variable"][m.group(1)]["default"]
    if m := re.fullmatch(r"google_sql_database\.(\w+)\.name", expression):
        return tf["resource"]["google_sql_database"][m.group(1)]["name"]
    if m := re.fullmatch(r"google_sql_user\.migrator\.name", expression):
        user = tf["resource"]["google_sql_user"]["migrator"]["name"]
        assert "google_service_account.builder.email" in user, user
        return _iam_user(tf, tf["resource"]["google_service_account"]["builder"])
    if m := re.fullmatch(r"\[for (\w+) in local\.db_functions : google_sql_user\.fn\[\1\]\.name\]", expression):
        assert tf["locals"]["db_functions"] == "${keys(local.all_functions)}"
        assert "google_service_account.fn[each.key].email" in tf["resource"]["google_sql_user"]["fn"]["name"]
        accounts = tf["resource"]["google_service_account"]["fn"]
        return [_iam_user(tf, {"account_id": accounts["account_id"].replace("${each.key}", key)})
                for key in _function_keys(tf)]
    raise AssertionError(f"the rehearsal cannot resolve {expression!r}: teach deploy_rehearsal._resolve")


def render_template(text: str, values: Mapping[str, Any]) -> str:
    """Terraform's templatefile for what the bootstrap uses: ``${name}`` and ``%{ for x in list ~}``."""

    def substitute(chunk: str, scope: Mapping[str, Any]) -> str:
        def value(m: re.Match[str]) -> str:
            if m.group(1) not in scope:
                raise AssertionError(f"the template names ${{{m.group(1)}}}, which terraform does not pass")
            return str(scope[m.group(1)])

        return re.sub(r"\$\{\s*(\w+)\s*\}", value, chunk)

    loop = re.compile(r"%\{ for (\w+) in (\w+) ~\}\n(.*?)%\{ endfor ~\}\n", re.S)

    def expand(m: re.Match[str]) -> str:
        return "".join(substitute(m.group(3), {**values, m.group(1): item}) for item in values[m.group(2)])

    expanded = loop.sub(expand, text)
    if "%{" in expanded:
        raise AssertionError("the template uses a directive the rehearsal does not render")
    return substitute(expanded, values)


def bootstrap_sql(tf: dict[str, Any] | None = None) -> str:
    """The ``db_bootstrap_sql`` output as ``terraform output -raw`` would print it."""
    tf = tf or terraform()
    value = tf["output"]["db_bootstrap_sql"]["value"]
    m = re.fullmatch(r'\$\{templatefile\("\$\{path\.module\}/([\w.]+)", \{(.*)\}\)\}', value, re.S)
    assert m, f"db_bootstrap_sql is no longer one templatefile(): {value[:120]}"
    arguments: dict[str, Any] = {}
    for line in filter(None, (part.strip() for part in re.split(r"\n|,(?![^\[]*\])", m.group(2)))):
        name, _, expression = line.partition("=")
        arguments[name.strip()] = _resolve(tf, expression)
    return render_template((TERRAFORM / m.group(1)).read_text(), arguments)


def iam_users(tf: dict[str, Any] | None = None) -> dict[str, str]:
    """Every IAM database user Terraform creates: the migrator and one per function."""
    tf = tf or terraform()
    users = {"migrator": _iam_user(tf, tf["resource"]["google_service_account"]["builder"])}
    accounts = tf["resource"]["google_service_account"]["fn"]
    for key in _function_keys(tf):
        users[key] = _iam_user(tf, {"account_id": accounts["account_id"].replace("${each.key}", key)})
    return users


# -- the migrate step ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MigrateStep:
    env: dict[str, str]
    command: list[str]


def migrate_step() -> MigrateStep:
    """cloudbuild.yaml's migrate step: its environment with the substitutions applied, and its last command."""
    build = yaml.safe_load((ROOT / "cloudbuild.yaml").read_text())
    step = next(s for s in build["steps"] if s["id"] == "migrate")
    substitutions = {**build["substitutions"], "PROJECT_ID": PROJECT}
    substitutions["_REGION"] = substitutions.get("_REGION", "europe-west1")

    def apply(text: str) -> str:
        return re.sub(r"\$\{(\w+)\}", lambda m: str(substitutions[m.group(1)]), text)

    env = {k: apply(v) for k, v in (e.split("=", 1) for e in step["env"])}
    script = " ".join(step["args"]).removeprefix("-c ").strip()
    # pip installs the package first; this checkout is installed already.
    command = shlex.split(script.split("&&")[-1])
    return MigrateStep(env, command)


# -- a PostgreSQL laid out as Cloud SQL's ------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    socket_dir: str
    bin_dir: Path
    superuser: str

    def url(self, user: str, database: str = "gleaner") -> str:
        return f"postgresql://{quote(user, safe='')}@/{database}?host={self.socket_dir}"

    def psql(self, user: str, sql: str, database: str = "gleaner") -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", self.socket_dir,
                               "-U", user, "-d", database], input=sql, capture_output=True, text=True, timeout=60,
                              check=False)


@contextmanager
def cloudsql_like(data_dir: Path, users: Mapping[str, str]) -> Iterator[Cluster]:
    """A fresh cluster: the admin (CREATEROLE, CREATEDB, no superuser) owns database gleaner; the IAM
    users exist as plain LOGIN roles (Cloud SQL creates them with its own superuser)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        server = pgserver.get_server(data_dir, cleanup_mode="stop")
    try:
        info = server.get_postmaster_info()
        bin_dir = Path(pgserver.__file__).parent / "pginstall" / "bin"
        cluster = Cluster(str(info.socket_dir), bin_dir, "postgres")
        logins = "".join(f'CREATE ROLE "{name}" LOGIN;\n' for name in users.values())
        done = cluster.psql(cluster.superuser, f"CREATE ROLE {ADMIN} LOGIN CREATEROLE CREATEDB;\n"
                            f"CREATE DATABASE gleaner OWNER {ADMIN};\n{logins}", database="postgres")
        assert done.returncode == 0, done.stderr
        yield cluster
    finally:
        server.cleanup()


def run_migrate_step(cluster: Cluster, step: MigrateStep) -> subprocess.CompletedProcess[str]:
    """The step's command with its environment; the Cloud SQL connector's IAM login becomes a direct
    login of the same user to the same database (the connector is Google's, not ours to rehearse)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GLEANER_")}
    env.update(step.env)
    instance = env.pop("GLEANER_CLOUDSQL_INSTANCE")
    assert instance.endswith(":gleaner")
    user = env.pop("GLEANER_CLOUDSQL_USER")
    env["GLEANER_DATABASE_URL"] = cluster.url(user, env.pop("GLEANER_CLOUDSQL_DATABASE", "gleaner"))
    assert step.command[0] == "gleaner", step.command
    return subprocess.run([sys.executable, "-m", "gleaner.cli", *step.command[1:]], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
