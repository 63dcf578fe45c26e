"""Who may do what in the annotations app: exemplars, datasets, runs, labels, queues. Every rule lives here.

Same conventions as ``agent/policies.py``: ``access_*`` return an object the user may see or raise ``Http404``
(an object on a database the user was not granted looks missing); ``check_*`` raise ``PermissionDenied``;
``can_*`` answer for templates. A dataset, run, run item, label or queue is visible only when every database
its questions use is visible to the user; an exemplar, when its database is.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404

from agent import policies as agent_policies
from agent.models import Workspace, WorkspaceMembership
from annotations.experiments.models import Candidate, CandidateSnapshot, Experiment, Suite, SuiteVersion
from annotations.labels.models import Label, LabelReveal, Queue
from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion
from annotations.runs.models import Dataset, DatasetQuestion, Run, RunItem


def _active(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def _perm(user, perm: str) -> bool:
    return _active(user) and user.has_perm(perm)


# --- capabilities ---------------------------------------------------------------------------------

def can_author_exemplars(user) -> bool:
    return _perm(user, "annotations.add_exemplar")


def can_review_exemplars(user) -> bool:
    """Curators review exemplars and publish sets (being staff is not enough)."""
    return _perm(user, "annotations.review_exemplar")


REVIEWER_ROLE = "Curator"


def exemplar_reviewers(exemplar: Exemplar):
    """Active accounts that may approve ``exemplar`` (Curators and superusers, its author excepted unless a
    superuser), for the hint shown to whoever is waiting."""
    perm = Permission.objects.filter(content_type__app_label="annotations", codename="review_exemplar").first()
    users = get_user_model().objects.filter(is_active=True)
    users = users.filter(Q(is_superuser=True) | Q(user_permissions=perm) | Q(groups__permissions=perm)).distinct()
    if exemplar.author_id is not None:
        users = users.exclude(Q(pk=exemplar.author_id) & Q(is_superuser=False))
    return users.order_by("username")


def can_create_sets(user) -> bool:
    return _perm(user, "annotations.add_exemplarset")


def can_label(user) -> bool:
    return _perm(user, "annotations.add_label")


def can_adjudicate(user) -> bool:
    return _perm(user, "annotations.adjudicate_label")


def can_create_queues(user) -> bool:
    return _perm(user, "annotations.add_queue")


def can_be_assigned(user, run: Run) -> bool:
    """Whether ``user`` may be named an assignee of a queue on ``run``: an active account that may label and
    sees the run (a queue assigned to anyone else would be work nobody can do)."""
    return bool(user.is_active and can_label(user) and visible_runs(user).filter(pk=run.pk).exists())


def can_import_datasets(user) -> bool:
    """Importing registers the dataset's databases: Operators."""
    return _perm(user, "annotations.add_dataset")


def can_launch_runs(user) -> bool:
    return _perm(user, "annotations.add_run")


def can_upload_predictions(user) -> bool:
    return _perm(user, "annotations.add_run")


def can_control_run(user, run: Run) -> bool:
    """Cancel, resume or re-evaluate: Operators."""
    return _perm(user, "annotations.change_run")


# --- visibility -------------------------------------------------------------------------------------

def _hidden_db_ids(user):
    return agent_policies.hidden_databases(user).values("pk")


def visible_datasets(user) -> QuerySet[Dataset]:
    """Datasets none of whose databases is hidden from the user, and which the user has a reason to see: one of
    its databases is visible, it was imported into a workspace the user belongs to, or the user uploaded it. A
    dataset with no usable database (its gold SQL included) is not shown to everyone."""
    if not agent_policies.can_view(user):
        return Dataset.objects.none()
    if user.is_superuser:
        return Dataset.objects.all()
    reachable = DatasetQuestion.objects.filter(
        dataset=OuterRef("pk"), database__in=agent_policies.visible_databases(user).values("pk"))
    return Dataset.objects.exclude(questions__database__in=_hidden_db_ids(user)).filter(
        Q(workspace__in=agent_policies.member_workspaces(user).values("pk")) | Q(created_by=user) | Exists(reachable))


def visible_runs(user) -> QuerySet[Run]:
    return Run.objects.filter(dataset__in=visible_datasets(user).values("pk"))


def visible_exemplars(user) -> QuerySet[Exemplar]:
    if not agent_policies.can_view(user):
        return Exemplar.objects.none()
    if user.is_superuser:
        return Exemplar.objects.all()
    return Exemplar.objects.filter(Q(database__isnull=True)
                                   | Q(database__in=agent_policies.visible_databases(user).values("pk")))


def visible_labels(user) -> QuerySet[Label]:
    return Label.objects.filter(item__run__in=visible_runs(user).values("pk"))


def visible_queues(user) -> QuerySet[Queue]:
    return Queue.objects.filter(run__in=visible_runs(user).values("pk"))


# --- blind double annotation -------------------------------------------------------------------------
# In a blind queue (more than one annotator per question), another annotator's labels on a question stay hidden
# from an annotator until they have labelled it (and asked to see them: a LabelReveal), and from everyone else
# until the question is adjudicated. Adjudicators see them always: they may adjudicate.

def blind_items(*, run_ids=None) -> QuerySet[RunItem] | None:
    """Run items held by a blind queue (of the given runs), as one query whatever the number of queues; None
    when there is no blind queue."""
    queues = Queue.objects.filter(blind=True, max_annotators__gt=1)
    if run_ids is not None:
        queues = queues.filter(run_id__in=list(run_ids))
    filters = [queue.item_filter() for queue in queues]
    if not filters:
        return None
    held = filters[0]
    for item_filter in filters[1:]:
        held |= item_filter
    return RunItem.objects.filter(held)


def blind_item_ids(*, run_ids=None) -> set[int]:
    """Run items held by a blind queue (of the given runs)."""
    items = blind_items(run_ids=run_ids)
    return set() if items is None else set(items.values_list("pk", flat=True))


def _open_items(user):
    """Items whose labels are open to ``user`` despite a blind queue: adjudicated, or revealed to them."""
    adjudicated = Label.objects.filter(is_final=True).values("item_id")
    if not _active(user):
        return Q(item_id__in=adjudicated)
    return Q(item_id__in=adjudicated) | Q(item_id__in=LabelReveal.objects.filter(user=user).values("item_id"))


def hide_blind_labels(user, labels: QuerySet[Label], *, run_ids=None) -> QuerySet[Label]:
    """``labels`` without those ``user`` may not see yet: other annotators' labels on questions of a blind queue
    that are neither adjudicated nor revealed to them. Used by every page, export and API that lists labels."""
    return _hide_blind(user, labels, owner="annotator_id", run_ids=run_ids)


def hide_blind_suggestion_events(user, events: QuerySet, *, run_ids=None) -> QuerySet:
    """Suggestion events without those that would tell ``user`` another annotator's labels: an event is marked
    accepted when its annotator then gave that label, so the acceptance figures follow the labels' blindness."""
    return _hide_blind(user, events, owner="user_id", run_ids=run_ids)


def _hide_blind(user, rows: QuerySet, *, owner: str, run_ids=None) -> QuerySet:
    if can_adjudicate(user):
        return rows
    blind = blind_items(run_ids=run_ids)
    if blind is None:
        return rows
    own = Q(**{owner: user.pk}) if _active(user) else Q(pk__in=[])
    # the ids, not a subquery: inside the overview's grouped count PostgreSQL planned the subquery far worse
    return rows.exclude(Q(item_id__in=list(blind.values_list("pk", flat=True))) & ~own & ~_open_items(user))


def can_see_others_labels(user, item: RunItem) -> bool:
    """Whether ``user`` may see the other annotators' labels on ``item`` now."""
    if can_adjudicate(user) or item.pk not in blind_item_ids(run_ids=[item.run_id]):
        return True
    if Label.objects.filter(item=item, is_final=True).exists():
        return True
    return _active(user) and LabelReveal.objects.filter(item=item, user=user).exists()


def labels_hidden_reason(user, item: RunItem) -> str:
    """Why the other annotators' labels on ``item`` are hidden from ``user`` ("" when they are not)."""
    if can_see_others_labels(user, item):
        return ""
    if _active(user) and Label.objects.filter(item=item, annotator=user, is_final=False).exists():
        return "revealable"  # labelled: the user may ask to see them
    if can_label(user):
        return "Blind queue: other annotators' labels show once you have labelled this question."
    return "Blind queue: the annotators' labels show once the question is adjudicated."


def check_can_reveal_labels(user, item: RunItem) -> None:
    check_can_label(user)
    if not Label.objects.filter(item=item, annotator=user, is_final=False).exists():
        raise PermissionDenied("Label the question first: other annotators' labels show after yours.")


def access_dataset(user, name: str) -> Dataset:
    dataset = visible_datasets(user).filter(name=name).first()
    if dataset is None:
        raise Http404("No such dataset.")
    return dataset


def access_run(user, pk: int) -> Run:
    run = visible_runs(user).select_related("dataset").filter(pk=pk).first()
    if run is None:
        raise Http404("No such run.")
    return run


def access_run_item(user, item_id: int, *, run_id: int | None = None) -> RunItem:
    qs = RunItem.objects.select_related("run__dataset", "question__database", "session").filter(
        run__in=visible_runs(user).values("pk"), pk=item_id)
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    item = qs.first()
    if item is None:
        raise Http404("No such question.")
    return item


def access_queue(user, pk: int) -> Queue:
    queue = visible_queues(user).select_related("run", "taxonomy_version__taxonomy").filter(pk=pk).first()
    if queue is None:
        raise Http404("No such queue.")
    return queue


def access_exemplar(user, pk: int) -> Exemplar:
    exemplar = visible_exemplars(user).select_related("database", "author", "reviewer").filter(pk=pk).first()
    if exemplar is None:
        raise Http404("No such exemplar.")
    return exemplar


def access_exemplar_set(user, pk: int) -> ExemplarSet:
    """A set ``user`` may see (``can_see_set``); any other answers exactly as a missing one."""
    exemplar_set = ExemplarSet.objects.select_related("workspace").filter(pk=pk).first()
    if exemplar_set is None or not can_see_set(user, exemplar_set):
        raise Http404("No such set.")
    return exemplar_set


# A set version is a frozen copy of exemplars drawn from several databases: it is visible only when every
# registered database it draws on (by the name each snapshot stores, and through the exemplar rows it came
# from) is visible to the reader, and its set is visible. A name no database here carries restricts nothing
# (imported paper sets).
#
# A set is visible to the members of its workspace (directly or through a group; superusers are in every
# workspace, ``agent.policies.member_workspaces``). A set in no workspace (the paper's, older ones) is visible to
# every reader, unless it has versions and the reader may see none of them: then its name would leak what they
# draw on. Versions of a visible set keep their own (database) rule.

def version_database_names(version: ExemplarSetVersion) -> set[str]:
    return _item_database_names(version.exemplars)


def _item_database_names(items) -> set[str]:
    return {str(item["database"]) for item in items if item.get("database")}


def _version_hidden(version: ExemplarSetVersion, hidden_names: set[str], hidden_exemplar_ids: set[int]) -> bool:
    return _items_hidden(version.exemplars, hidden_names, hidden_exemplar_ids)


def _items_hidden(items, hidden_names: set[str], hidden_exemplar_ids: set[int]) -> bool:
    """Whether exemplar snapshots (a version's, a candidate snapshot's) draw on a hidden database."""
    return bool(_item_database_names(items) & hidden_names
                or {item.get("exemplar_id") for item in items} & hidden_exemplar_ids)


def _hidden_for(user) -> tuple[set[str], set[int]] | None:
    """Names of the databases hidden from ``user`` and ids of the exemplars on them; None when nothing is."""
    hidden = agent_policies.hidden_databases(user)
    names = set(hidden.values_list("name", flat=True))
    if not names:
        return None
    return names, set(Exemplar.objects.filter(database__in=hidden.values("pk")).values_list("pk", flat=True))


def _versions_on_visible_databases(user) -> QuerySet[ExemplarSetVersion]:
    """Set versions every database of which ``user`` sees (one pass over the versions' snapshots)."""
    hidden = _hidden_for(user)
    if hidden is None:
        return ExemplarSetVersion.objects.all()
    blocked = [pk for pk, items in ExemplarSetVersion.objects.values_list("pk", "exemplars")
               if _version_hidden(ExemplarSetVersion(exemplars=items), *hidden)]
    return ExemplarSetVersion.objects.exclude(pk__in=blocked)


def _sets_visible_given(user, shown_versions: QuerySet[ExemplarSetVersion]) -> QuerySet[ExemplarSet]:
    """The set rule, given the versions ``user`` sees by their databases."""
    in_workspace = Q(workspace__in=agent_policies.member_workspaces(user).values("pk"))
    no_workspace = Q(workspace__isnull=True) & (
        ~Exists(ExemplarSetVersion.objects.filter(exemplar_set=OuterRef("pk")))
        | Exists(shown_versions.filter(exemplar_set=OuterRef("pk"))))
    return ExemplarSet.objects.filter(in_workspace | no_workspace)


def visible_sets(user) -> QuerySet[ExemplarSet]:
    """Exemplar sets ``user`` may see: the one rule for the set list, the API, commands acting for a user."""
    if not agent_policies.can_view(user):
        return ExemplarSet.objects.none()
    return _sets_visible_given(user, _versions_on_visible_databases(user))


def can_see_set(user, exemplar_set: ExemplarSet) -> bool:
    """``visible_sets`` for one set."""
    if not agent_policies.can_view(user):
        return False
    if exemplar_set.workspace_id is not None:
        return agent_policies.member_workspaces(user).filter(pk=exemplar_set.workspace_id).exists()
    hidden = _hidden_for(user)
    if hidden is None:
        return True
    snapshots = list(exemplar_set.versions.values_list("exemplars", flat=True))
    return not snapshots or any(not _version_hidden(ExemplarSetVersion(exemplars=items), *hidden)
                                for items in snapshots)


def can_see_version(user, version: ExemplarSetVersion) -> bool:
    if not agent_policies.can_view(user):
        return False
    hidden = _hidden_for(user)
    if hidden is not None and _version_hidden(version, *hidden):
        return False
    return can_see_set(user, version.exemplar_set)


def can_see_exemplar_source(user, source) -> bool:
    """Whether ``user`` sees every database the exemplars of a session's snapshot came from, and their set, by the
    source the snapshot names (``config["exemplar_set_version"]``): a set version (``{"id": ...}``) or an
    experiment candidate's frozen content (``{"snapshot": ...}``), judged as ``can_see_version`` judges a version.
    Fails closed: a source naming neither, or whose row is gone, is not seen."""
    if not agent_policies.can_view(user) or not isinstance(source, dict):
        return False
    try:
        if source.get("snapshot") is not None:
            row = (CandidateSnapshot.objects.select_related("candidate__exemplar_set__workspace")
                   .filter(pk=int(source["snapshot"])).first())
            exemplar_set = row.candidate.exemplar_set if row is not None else None
        elif source.get("id") is not None:
            row = ExemplarSetVersion.objects.select_related("exemplar_set__workspace").filter(
                pk=int(source["id"])).first()
            exemplar_set = row.exemplar_set if row is not None else None
        else:
            return False
    except (TypeError, ValueError):
        return False
    items = row.exemplars if row is not None else None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return False
    hidden = _hidden_for(user)
    return (hidden is None or not _items_hidden(items, *hidden)) and can_see_set(user, exemplar_set)


def visible_versions(user) -> QuerySet[ExemplarSetVersion]:
    """Set versions ``user`` may see: every database they draw on is visible, and so is their set."""
    if not agent_policies.can_view(user):
        return ExemplarSetVersion.objects.none()
    shown = _versions_on_visible_databases(user)
    return shown.filter(exemplar_set__in=_sets_visible_given(user, shown).values("pk"))


def access_version(user, set_id: int, number: int) -> ExemplarSetVersion:
    """A version of a set ``user`` may see; 404 (as for a missing one) when it draws on a hidden database or its
    set is hidden."""
    version = (ExemplarSetVersion.objects.select_related("exemplar_set", "created_by")
               .filter(exemplar_set_id=set_id, number=number).first())
    if version is None or not can_see_version(user, version):
        raise Http404("No such version.")
    return version


def access_version_by_id(user, pk: int) -> ExemplarSetVersion:
    version = ExemplarSetVersion.objects.select_related("exemplar_set", "created_by").filter(pk=pk).first()
    if version is None or not can_see_version(user, version):
        raise Http404("No such version.")
    return version


def set_workspace_choices(user) -> QuerySet[Workspace]:
    """Where ``user`` may put a new exemplar set: a workspace they belong to (every one for a trusted command)."""
    if user is None:
        return Workspace.objects.all()
    return agent_policies.member_workspaces(user)


def default_set_workspace(user) -> Workspace | None:
    """A new set's workspace when none is named: the one workspace the creator is a member of (by their own or a
    group's membership: a superuser is not thereby in every one), else none."""
    if user is None or not agent_policies.can_view(user):
        return None
    mine = list(Workspace.objects.filter(pk__in=WorkspaceMembership.objects.of(user).values("workspace_id"))[:2])
    return mine[0] if len(mine) == 1 else None


# --- checks -------------------------------------------------------------------------------------------

def check_can_author_exemplar(user) -> None:
    if not can_author_exemplars(user):
        raise PermissionDenied("Writing exemplars needs the Annotator or Curator role.")


def can_edit_exemplar(user, exemplar: Exemplar) -> bool:
    """Its author, or a Curator."""
    return (_active(user) and exemplar.author_id == user.pk) or can_review_exemplars(user)


def check_can_edit_exemplar(user, exemplar: Exemplar) -> None:
    if not can_edit_exemplar(user, exemplar):
        raise PermissionDenied("Only the author or a Curator can edit this exemplar.")


def check_can_review_exemplar(user, exemplar: Exemplar) -> None:
    if not can_review_exemplars(user):
        raise PermissionDenied("Only Curators review exemplars.")
    if exemplar.author_id is not None and exemplar.author_id == user.pk and not user.is_superuser:
        raise PermissionDenied("You cannot approve your own exemplar; ask another reviewer.")


def check_can_create_set(user) -> None:
    if not can_create_sets(user):
        raise PermissionDenied("Creating exemplar sets needs the Curator role.")


def check_can_publish_set(user, exemplar_set: ExemplarSet) -> None:
    """Publishing makes exemplars part of every prompt that uses the set: Curators only."""
    if not can_review_exemplars(user):
        raise PermissionDenied("Only Curators publish exemplar sets.")


def check_can_label(user) -> None:
    if not can_label(user):
        raise PermissionDenied("Labelling needs the Annotator role.")


def check_can_adjudicate(user) -> None:
    if not can_adjudicate(user):
        raise PermissionDenied("Adjudicating labels needs the Curator role.")


def check_can_create_queue(user) -> None:
    if not can_create_queues(user):
        raise PermissionDenied("Creating label queues needs the Curator role.")


def check_can_import_dataset(user) -> None:
    if not can_import_datasets(user):
        raise PermissionDenied("Importing datasets needs the Operator role (it registers their databases).")


def check_can_launch_run(user, dataset: Dataset) -> None:
    """Runs spend LLM tokens on every question: Operators, on a dataset they can see."""
    if not visible_datasets(user).filter(pk=dataset.pk).exists():
        raise Http404("No such dataset.")
    if not can_launch_runs(user):
        raise PermissionDenied("Launching runs needs the Operator role.")


def check_can_upload_predictions(user, dataset: Dataset) -> None:
    if not visible_datasets(user).filter(pk=dataset.pk).exists():
        raise Http404("No such dataset.")
    if not can_upload_predictions(user):
        raise PermissionDenied("Uploading predictions needs the Operator role.")


def check_can_control_run(user, run: Run) -> None:
    if not can_control_run(user, run):
        raise PermissionDenied("Cancelling, resuming or re-evaluating runs needs the Operator role.")


def can_import_exemplars(user) -> bool:
    """Importing publishes a set of exemplars approved on import: Curators."""
    return can_create_sets(user) and can_review_exemplars(user)


def check_can_import_exemplars(user) -> None:
    if not can_import_exemplars(user):
        raise PermissionDenied("Importing exemplar sets needs the Curator role.")


# --- exemplar experiments: suites, candidate versions, experiments -----------------------------------------
# A suite follows its dataset's grants; a candidate, the databases of the exemplars it holds; an experiment,
# both (its runs are runs of the suite's dataset). Curators build suites and candidates and run experiments
# (they spend on every question, billed to the Curator's budget); everyone who sees one reads its results,
# so an exemplar's author sees how the exemplar did.

def can_create_suites(user) -> bool:
    return _perm(user, "annotations.add_suite")


def can_edit_candidates(user) -> bool:
    return _perm(user, "annotations.change_candidate")


def can_run_experiments(user) -> bool:
    return _perm(user, "annotations.add_experiment")


def visible_suites(user) -> QuerySet[Suite]:
    return Suite.objects.filter(dataset__in=visible_datasets(user).values("pk"))


def visible_candidates(user) -> QuerySet[Candidate]:
    if not agent_policies.can_view(user):
        return Candidate.objects.none()
    if user.is_superuser:
        return Candidate.objects.all()
    shown = _versions_on_visible_databases(user)
    return Candidate.objects.exclude(items__exemplar__database__in=_hidden_db_ids(user)).filter(
        exemplar_set__in=_sets_visible_given(user, shown).values("pk")).filter(
        Q(base_version__isnull=True) | Q(base_version__in=shown.values("pk")))


def visible_experiments(user) -> QuerySet[Experiment]:
    candidates = visible_candidates(user).values("pk")
    return Experiment.objects.filter(suite_version__suite__in=visible_suites(user).values("pk"),
                                     candidate__in=candidates).filter(
        Q(baseline_candidate__isnull=True) | Q(baseline_candidate__in=candidates)).filter(
        Q(baseline_version__isnull=True) | Q(baseline_version__in=visible_versions(user).values("pk")))


def access_suite(user, pk: int) -> Suite:
    suite = visible_suites(user).select_related("dataset").filter(pk=pk).first()
    if suite is None:
        raise Http404("No such suite.")
    return suite


def access_suite_version(user, suite_id: int, number: int) -> SuiteVersion:
    suite = access_suite(user, suite_id)
    version = suite.versions.filter(number=number).first()
    if version is None:
        raise Http404("No such suite version.")
    return version


def access_candidate(user, pk: int) -> Candidate:
    candidate = visible_candidates(user).select_related("exemplar_set", "base_version").filter(pk=pk).first()
    if candidate is None:
        raise Http404("No such candidate.")
    return candidate


def access_experiment(user, pk: int) -> Experiment:
    experiment = (visible_experiments(user).select_related(
        "exemplar_set", "candidate", "baseline_version", "baseline_candidate", "suite_version__suite__dataset")
        .filter(pk=pk).first())
    if experiment is None:
        raise Http404("No such experiment.")
    return experiment


def check_can_create_suites(user) -> None:
    if not can_create_suites(user):
        raise PermissionDenied("Building suites needs the Curator role.")


def check_can_create_suite(user, dataset: Dataset) -> None:
    if not visible_datasets(user).filter(pk=dataset.pk).exists():
        raise Http404("No such dataset.")
    check_can_create_suites(user)


def check_can_run_experiments(user) -> None:
    if not can_run_experiments(user):
        raise PermissionDenied("Running experiments needs the Curator role.")


def check_can_edit_candidate(user, candidate: Candidate | None = None) -> None:
    """Composing a candidate (the next version of a set, in draft): Curators, as for publishing."""
    if not can_edit_candidates(user):
        raise PermissionDenied("Composing candidate versions needs the Curator role.")


def check_can_run_experiment(user, suite_version: SuiteVersion) -> None:
    """An experiment runs every question of the suite at least twice (LLM spend): Curators who see the suite."""
    if not visible_suites(user).filter(pk=suite_version.suite_id).exists():
        raise Http404("No such suite.")
    check_can_run_experiments(user)


def check_can_control_experiment(user, experiment: Experiment) -> None:
    if not _perm(user, "annotations.change_experiment"):
        raise PermissionDenied("Cancelling experiments needs the Curator role.")
