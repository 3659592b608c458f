"""Rule-based extraction and entity resolution (pure functions, no store)."""

from __future__ import annotations

from graphmem.knowledge.extract import extract, normalise
from graphmem.knowledge.resolve import Gazetteer, entity_id
from graphmem.models import Entity, EntityType


def names(text: str, known: dict[str, EntityType] | None = None) -> dict[str, EntityType]:
    return {m.norm: m.type for m in extract(text, known).mentions}


def test_normalise_folds_case_possessives_articles_and_punctuation() -> None:
    assert normalise("The Lord of the Rings") == "lord of the rings"
    assert normalise("Caroline's") == "caroline"
    assert normalise("  LGBTQ+  ") == "lgbtq+"
    assert normalise("Fort-Wayne!") == "fort wayne"


def test_transcript_speaker_is_a_person_with_the_speaker_role() -> None:
    ms = extract("Melanie: I just signed up for a pottery class yesterday.").mentions
    speaker = [m for m in ms if m.role == "speaker"]
    assert [(m.name, m.type) for m in speaker] == [("Melanie", EntityType.PERSON)]
    assert "pottery class" in {m.norm for m in ms}


def test_a_label_before_a_colon_is_not_a_speaker() -> None:
    assert "note" not in names("Note: the deploy runs at noon.")


def test_capitalised_spans_with_connectors_and_types_from_cues() -> None:
    found = names("We visited Fort Wayne and watched The Lord of the Rings with Anna.")
    assert found["fort wayne"] is EntityType.PLACE
    assert "lord of the rings" in found
    assert found["anna"] is EntityType.PERSON


def test_sentence_initial_word_is_a_name_when_known_or_followed_by_a_verb() -> None:
    assert "honesty" not in names("Honesty matters most.")
    assert names("Honesty matters most.", {"honesty": EntityType.OTHER})["honesty"] is (
        EntityType.OTHER
    )
    assert names("Melanie went camping.")["melanie"] is EntityType.PERSON
    assert "caroline" in names("Caroline is going to the group.")
    # gerunds, general nouns and contractions are not names
    assert names("Painting is fun. Life is good. Work was busy.") == {}
    # greetings, pronouns and weekdays are never names
    assert names("Thanks, Mel! See you on Friday. Wow.") == {"mel": EntityType.PERSON}


def test_a_title_in_single_quotes_starts_like_a_sentence() -> None:
    """A ticket quoted in a message: its first word is capitalised because it opens the
    title, as after a colon or a double quote."""
    found = names("researcher, please take 'Rotate the leaked API token' and report back.")
    assert found == {"api": EntityType.OTHER}, found
    assert "remove" not in names("Closed ‘Remove secrets from the CI logs’.")
    assert names("She said 'Anna went home' twice.")["anna"] is EntityType.PERSON


def test_acronyms_quoted_titles_activities_and_groups() -> None:
    found = names(
        "Jon: I went camping, joined an LGBTQ support group and loved reading \"Charlotte's "
        'Web" at the book club.'
    )
    assert {"camping", "lgbtq", "charlotte web", "book club"} <= set(found)
    assert found["charlotte web"] is EntityType.OBJECT
    assert found["book club"] is EntityType.ORGANISATION


def test_generic_gerunds_and_vague_groups_are_not_entities() -> None:
    found = names("Gina: I love doing something new with a great group of friends.")
    assert set(found) == {"gina"}


def test_organisation_event_and_place_suffixes() -> None:
    found = names(
        "Ann: Later the Oakland Jazz Festival, then Stanford University, then Golden Gate Park."
    )
    assert found["oakland jazz festival"] is EntityType.EVENT
    assert found["stanford university"] is EntityType.ORGANISATION
    assert found["golden gate park"] is EntityType.PLACE


def test_relations_resolve_first_person_to_the_speaker() -> None:
    ex = extract(
        "Caroline: I moved from Sweden four years ago. My sister Anna lives here. "
        "I work at Acme Labs."
    )
    rels = {(r.subject, r.predicate, r.object) for r in ex.relations}
    assert ("caroline", "moved_from", "sweden") in rels
    assert ("caroline", "sister", "anna") in rels
    assert ("caroline", "works_at", "acme labs") in rels
    # without a speaker nobody is "I": no relation is made up
    assert extract("I moved from Sweden.").relations == ()


def _person(norm: str, *aliases: str) -> Entity:
    return Entity(name=norm.title(), norm=norm, type=EntityType.PERSON, aliases=aliases)


def test_short_forms_resolve_to_a_unique_known_person() -> None:
    g = Gazetteer.of("agent:a", [_person("melanie"), _person("joanna"), _person("jon")])
    assert g.resolve("mel", EntityType.PERSON) == "melanie"
    assert g.resolve("mel", EntityType.OTHER) == "melanie"
    assert g.resolve("jo", EntityType.PERSON) is None  # too short, and ambiguous
    assert g.resolve("mel", EntityType.PLACE) is None  # only people have short forms
    assert g.resolve("melanie smith", EntityType.PERSON) == "melanie"
    assert g.resolve("nate", EntityType.PERSON) is None


def test_aliases_resolve_and_overlays_keep_additions_apart() -> None:
    base = Gazetteer.of("agent:a", [_person("robert", "Bob")])
    assert base.resolve("bob", EntityType.OTHER) == "robert"
    layer = base.overlay()
    layer.put(_person("alice"))
    assert layer.resolve("alice", EntityType.PERSON) == "alice"
    assert base.get("alice") is None
    base.absorb(layer)
    assert base.get("alice") is not None


def test_entity_ids_are_per_audience() -> None:
    assert entity_id("agent:a", "melanie") == entity_id("agent:a", "melanie")
    assert entity_id("agent:a", "melanie") != entity_id("agent:b", "melanie")


def test_things_takes_specific_nouns_after_determiners_only_when_asked() -> None:
    text = "Mel: We camped at the beach; I play my violin and the kids had a great time."
    assert "violin" not in names(text)
    found = {m.norm: m.type for m in extract(text, things=True).mentions}
    assert found["violin"] is EntityType.OBJECT
    assert found["beach"] is EntityType.PLACE
    assert "time" not in found and "kid" not in found  # too general to be about anything


def test_group_names_skip_verbs_and_adjectives_in_front() -> None:
    found = names("Gina: I loved taking lessons, then joined a cooking class at a new club.")
    assert "cooking class" in found
    assert not any(n.startswith(("loved", "taking", "new")) for n in found)


def test_long_capitalised_runs_are_not_names() -> None:
    assert names("We Xx " + "Xx " * 200 + "left.") == {}
