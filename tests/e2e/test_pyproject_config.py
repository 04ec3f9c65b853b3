"""``[tool.gleaner]`` in a project's pyproject.toml, as ``gleaner info`` reports it."""

from __future__ import annotations

import json

from .test_first_hour import clean_env, gleaner


def test_info_reads_settings_from_the_tool_gleaner_table_of_the_current_pyproject(tmp_path, database_url):
    project, home = tmp_path / "project", tmp_path / "from-pyproject"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "mine"\n\n[tool.gleaner]\nhome = "{home}"\ndatabase_url = "{database_url}"\n')
    env = clean_env(XDG_DATA_HOME=str(tmp_path / "xdg"))
    result = gleaner(env, "info", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["home"] == str(home)
    assert info["config_files"] == [str(project / "pyproject.toml")]
    assert info["database_embedded"] is False
    # Outside the project the table does not apply: the default home (the database comes from the environment).
    outside = gleaner({**env, "GLEANER_DATABASE_URL": database_url}, "info", "--json", cwd=tmp_path)
    elsewhere = json.loads(outside.stdout)
    assert elsewhere["home"] == str(tmp_path / "xdg" / "gleaner") and elsewhere["config_files"] == []
