"""Score's model: a sample of the loaded case finished as a headless run finishes it. Qt-free.

Nothing here scores: a sample is verified and written by :func:`imagebench.runs.runner.finish_unit`,
the phase the headless runner ends a unit with, so a panel run and ``imagebench run`` leave
identical ``summary.json`` files. The interactive subject may score the session opened at Load
as often as they like, each score a new sample.

After a score the panel can show more than the score: what states the truth (the case's
provenance, :meth:`ScoreModel.truth_shown`), which for the loaded case flags the person's later
samples of it, as viewing its artifacts does (the sitting's folder and report flag them too:
:meth:`napari_imagebench._folder_model.FolderModel.handed_out`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from napari_imagebench._base import INTERACTIVE, INTERACTIVE_NAME, Notices
from napari_imagebench._runs import ResultRow

if TYPE_CHECKING:
    from imagebench.subjects import SubjectRun
    from napari_imagebench._answer_model import AnswerModel
    from napari_imagebench._results_model import ResultsModel
    from napari_imagebench._subjects_model import SubjectsModel
    from napari_imagebench._workbench_model import WorkbenchModel

#: The flag of a person's sample scored after the loaded case's artifacts were viewed
#: (``WorkbenchModel.artifacts_shown``) or its run folder was opened.
SAW_ARTIFACTS = "saw-artifacts"
#: The flag of a person's sample scored after the panel showed what states the loaded case's truth.
SAW_TRUTH = "saw-truth"


class ScoreModel:
    """Score: the person's leavings, or a subject's last Run, verified and written as a sample."""

    def __init__(
        self,
        notices: Notices,
        workbench: WorkbenchModel,
        subjects: SubjectsModel,
        answering: AnswerModel,
        ledger: ResultsModel,
    ) -> None:
        self.notices, self.workbench, self.subjects = notices, workbench, subjects
        self.answering, self.ledger = answering, ledger

    def score(
        self,
        spec: str,
        *,
        layers: Mapping[str, Any] | None = None,
        console: Mapping[str, Any] | None = None,
    ) -> ResultRow:
        """Finish the unit of ``spec`` (:func:`imagebench.runs.runner.finish_unit`): collect its leavings,
        verify them and write the sample, as a headless run does.

        For the interactive subject, ``layers`` (``{name: data}`` of the viewer's layers) and
        ``console`` (the console's namespace, None when it is not open) are searched first.
        """
        from imagebench.runs.runner import finish_unit

        loaded = self.workbench.need_loaded()
        case = loaded.case
        flags: list[str] = []
        lookup: Callable[[str], Any] | None = None
        run: SubjectRun | None = None
        if spec == INTERACTIVE:
            name = INTERACTIVE_NAME
            unit = loaded.unit
            missing = self.answering.missing_answers(layers or {}, console)
            if missing:  # a sample is written only for a complete answer
                how = {s.name: s.how() for s in self.answering.answer_slots()}
                todo = "; ".join(f"{n}: {why}; {how.get(n, 'bind it in the console')}" for n, why in missing.items())
                raise self.notices.fail(f"leave {', '.join(missing)} first ({todo})", "warning")
            lookup = self.answering.interactive_lookup(layers or {}, console)
            # A person who has seen another subject's answer or the artifacts (which can show the
            # truth) is no longer working blind: the sample says so.
            flags = sorted(self.workbench.flags())
            if flags:
                self.notices.notify(
                    "warning", f"this sample is flagged {', '.join(flags)}: this sitting you have seen more than the data"
                )
        else:
            name = self.subjects.subject_name(spec)
            pending = loaded.runs.pop(name, None)
            if pending is None:
                raise self.notices.fail(f"run {spec} on {case.label} first: each Run is one sample to score", "warning")
            unit, run = pending
        leavings = {c.name for c in case.collect}
        for deleted in self.workbench.deleted:
            if spec != INTERACTIVE:
                effect = f"; {name} is scored from its session, so the score does not depend on it"
            elif deleted in leavings:
                effect = "; unless the console or the panel holds that name, the leaving is missing"
            else:
                effect = ""
            self.notices.notify("warning", f"layer {deleted!r} was deleted before scoring{effect}")
        folder = self.ledger.run_folder(name)
        if spec == INTERACTIVE:  # each Score of the person's work is a new sample
            unit.run_dir, unit.sample = folder.path, folder.next_sample(case.label)
        summary = finish_unit(unit, run, lookup=lookup, flags=flags)
        done = self.ledger.add(folder, case, summary)
        need = int(case.meta.get("min_samples", 1))
        if len(done) < need:  # a bundle's rerun case: judged over several samples of one subject
            self.notices.notify(
                "info",
                f"{case.label} is judged over at least {need} samples of one subject; {len(done)} scored so far "
                "(until then the case fails its consistency check): Run and Score it again",
            )
        checks = tuple(str(c) for c in case.meta.get("checks") or ())
        result = ResultRow.of(summary, folder.path, unit.sample_dir, checks=checks)
        self.workbench.deleted = []  # each deletion is reported with the sample it affected, once
        return self.ledger.record(result)

    # ---------------------------------------------------------------- what a score shows beyond itself

    def _seen(self, flag: str, label: str, what: str) -> bool:
        """Keep ``flag`` for case ``label`` (:meth:`WorkbenchModel.mark`); True when it newly flags the loaded case."""
        if not self.workbench.mark(label, flag):
            return False
        loaded = self.workbench.need_loaded()
        self.notices.notify("warning", f"{what}: your next samples of {loaded.case.label} are flagged {flag}")
        return True

    def truth_shown(self, result: ResultRow) -> str:
        """What states the truth of ``result``'s case (its provenance), shown after it was scored;
        for the loaded case, the person's later samples of it are flagged ``saw-truth``."""
        truth = self.ledger.explanation(result).truth
        if truth:
            self._seen(SAW_TRUTH, result.label, "the panel showed how the case was made, which states its truth")
        return truth
