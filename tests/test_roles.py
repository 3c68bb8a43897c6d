"""A run's role (normgrow.paper.roles.Role): built from the placement and the curriculum's shape,
written into frames as `{placement}-{curriculum}` and read back whole, whatever dashes either part has."""

import pytest

from normgrow.paper.roles import CURRICULUM_ROLES, OTHER, Role, has_role


@pytest.mark.parametrize("placement", ["pre", "post", "mix-ln", "mix-ln@2", "a-b-grow"])
@pytest.mark.parametrize("curriculum", CURRICULUM_ROLES)
def test_a_role_label_reads_back_as_its_role(placement, curriculum):
    role = Role(placement, curriculum)
    assert Role.parse(str(role)) == role
    assert has_role(str(role), curriculum)
    assert not has_role(str(role), "joint" if curriculum != "joint" else "grow")


def test_a_run_without_a_role_has_none_and_a_stray_label_is_refused():
    assert Role.parse(OTHER + "pre-grow") is None and not has_role(OTHER + "pre-grow", "grow")
    with pytest.raises(ValueError, match="names no role"):
        Role.parse("pre-warmup")


@pytest.mark.parametrize("operator", ["zero", "zero-copy", "copy", "ramp20"])
@pytest.mark.parametrize("placement", ["post", "mix-ln@2"])
def test_a_growth_operator_is_part_of_the_role_and_not_the_papers(operator, placement):
    role = Role(placement, "grow", operator)
    assert str(role) == f"{placement}-grow+{operator}" and Role.parse(str(role)) == role
    assert has_role(str(role), "grow", operator) and not has_role(str(role), "grow")


def test_runs_under_other_operators_have_their_own_roles():
    import yaml
    from conftest import REPO

    from normgrow.design.config import validate_config
    from normgrow.paper.roles import run_roles

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["curricula"]["grow-zero"] = [{"active_blocks": 1}, {"active_blocks": 2, "growth": {"operator": "zero"}},
                                        {"active_blocks": 3, "growth": {"operator": "zero"}}]
    config["curricula"]["grow-mixed"] = [{"active_blocks": 1}, {"active_blocks": 2, "growth": {"operator": "zero"}},
                                         {"active_blocks": 3}]
    config["runs"].update({"pz": {"placement": "post", "curriculum": "grow-zero"},
                           "pm": {"placement": "post", "curriculum": "grow-mixed"}})
    roles = run_roles(validate_config(config))
    assert roles["pz"] == Role("post", "grow", "zero") and roles["post-grow"] == Role("post", "grow")
    assert "pm" not in roles  # operators mixed within one curriculum: no role
