"""Every case of Beam's trigger_transcripts.yaml (from the installed wheel), plus
our own transcripts in tests/core/data, against our reduce driver."""

import os
import re

import pytest
import yaml

from tests.core.transcript_harness import TranscriptFailure
from tests.core.transcript_harness import beam_transcripts
from tests.core.transcript_harness import run_batch_transcript
from tests.core.transcript_harness import run_transcript

DATA = os.path.join(os.path.dirname(__file__), 'data')


def _ids(specs):
    seen = {}
    out = []
    for s in specs:
        name = s.get('name', 'unnamed')
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else '%s_%d' % (name, seen[name]))
    return out


BEAM = beam_transcripts()


def test_beam_transcripts_loaded_from_wheel():
    # Guards against silently running zero cases.
    assert len(BEAM) == 18
    assert sum(1 for s in BEAM if 'error' in s) == 5


def _expected_to_fail(spec):
    return spec.get('name', '').startswith(('bad_', 'missing_'))


@pytest.mark.parametrize('spec', BEAM, ids=_ids(BEAM))
def test_beam_transcript(spec):
    if _expected_to_fail(spec):
        assert 'error' in spec
        with pytest.raises(TranscriptFailure, match=re.escape(spec['error'])):
            run_transcript(spec)
    else:
        run_transcript(spec)


def _own_specs():
    specs = []
    for fn in sorted(os.listdir(DATA)):
        if fn.endswith('.yaml'):
            with open(os.path.join(DATA, fn)) as f:
                for spec in yaml.safe_load_all(f):
                    if spec:
                        spec['_file'] = fn
                        specs.append(spec)
    return specs


OWN = _own_specs()


@pytest.mark.parametrize('spec', OWN, ids=['%s:%s' % (s['_file'], s['name']) for s in OWN])
def test_own_transcript(spec):
    if 'error' in spec:
        with pytest.raises(TranscriptFailure, match=re.escape(spec['error'])):
            run_transcript(spec)
    else:
        run_transcript(spec)


DIVERGENCES = [s for s in OWN if 'beam_transcript' in s]


def test_divergences_are_recorded():
    assert len(DIVERGENCES) >= 2
    for spec in DIVERGENCES:
        assert spec.get('reason')


@pytest.mark.parametrize('spec', DIVERGENCES, ids=[s['name'] for s in DIVERGENCES])
def test_beam_really_answers_differently(spec):
    from tests.core.transcript_harness import run_transcript_on_beam

    beam_spec = dict(spec, transcript=spec['beam_transcript'])
    # Beam's driver gives the answer written down as Beam's ...
    run_transcript_on_beam(beam_spec)
    # ... which is not ours, and Beam's driver fails the correct transcript.
    with pytest.raises(TranscriptFailure):
        run_transcript(beam_spec)
    with pytest.raises(TranscriptFailure):
        run_transcript_on_beam(spec)


BATCH = [s for s in OWN if 'batch_expect' in s]


def test_closing_cases_say_what_batch_gives():
    # Every closing case (and every book example) runs in batch too.
    files = {s['_file'] for s in BATCH}
    assert {'closing.yaml', 'streamingbook.yaml'} <= files
    for spec in OWN:
        if spec['_file'] in ('closing.yaml', 'streamingbook.yaml'):
            assert 'batch_expect' in spec, spec['name']
            assert spec.get('source'), spec['name']


@pytest.mark.parametrize('spec', BATCH, ids=['%s:%s' % (s['_file'], s['name']) for s in BATCH])
def test_own_transcript_in_batch(spec):
    run_batch_transcript(spec)
