"""A run's role (normgrow.paper.roles.Role): built from the placement and the curriculum's shape,
written into frames as `{placement}-{curriculum}` and read back whole, whatever dashes either part has."""

import pytest

from normgrow.paper.roles import CURRICULUM_ROLES, OTHER, Role, has_role


@pytest.mark.parametrize("placement", ["pre", "post", "mix-ln", "a-b-grow"])
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
