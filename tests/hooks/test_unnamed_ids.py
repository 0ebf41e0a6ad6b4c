"""An agno agent or team built with neither id= nor name= gets a random id from agno in every
process (`generate_human_readable_id`), so `report --agent <id>` found nothing after a restart. Its
records carry an id derived from the agent itself instead: two equal agents (what a restart builds)
share it, a different agent does not, and an id given by `id=` or `name=` is kept as agno has it."""

from __future__ import annotations

from agno.agent import Agent

from judgehooks import MemoryStore


def graded_id(make_judge, make_agent, **agent) -> tuple[str, str]:
    store = MemoryStore()
    built = make_agent(make_judge(name="helpful", store=store), **agent)
    built.run("hello")
    [record] = store.records
    return record.agent_id, built.id


def test_two_equal_unnamed_agents_are_stored_under_one_stable_id(make_judge, make_agent):
    first, agno_first = graded_id(make_judge, make_agent, instructions="Be brief.")
    second, agno_second = graded_id(make_judge, make_agent, instructions="Be brief.")
    assert agno_first != agno_second  # agno's own ids: made up anew for each agent
    assert first == second
    assert first.startswith("unnamed-agent-")


def test_a_different_unnamed_agent_gets_a_different_id(make_judge, make_agent):
    brief, _ = graded_id(make_judge, make_agent, instructions="Be brief.")
    long, _ = graded_id(make_judge, make_agent, instructions="Explain at length.")
    assert brief != long and long.startswith("unnamed-agent-")


def test_an_id_from_id_or_name_is_kept_as_agno_gives_it(make_judge, make_agent):
    assert graded_id(make_judge, make_agent, id="support-bot") == ("support-bot", "support-bot")
    assert graded_id(make_judge, make_agent, name="Support Bot") == ("support-bot", "support-bot")
    # an id of agno's made-up shape, but given by the user (its words are not agno's), is kept
    assert graded_id(make_judge, make_agent, id="blue-sky-0123abcd")[0] == "blue-sky-0123abcd"


def test_two_equal_unnamed_teams_share_a_stable_id(make_judge, make_team):
    ids = []
    for _ in range(2):
        store = MemoryStore()
        make_team(make_judge(name="helpful", store=store)).run("hello")
        [record] = store.records
        ids.append(record.team_id)
    assert ids[0] == ids[1] and ids[0].startswith("unnamed-team-")


def test_agnos_own_id_for_an_unnamed_agent_is_random():
    """What the ids above replace: agno's id for an agent without id= or name=."""
    first, second = Agent(), Agent()
    first.set_id(), second.set_id()
    assert first.id != second.id
