"""REST endpoints for suites, candidate versions and experiments (DRF): thin; rules in annotations.policies and the
experiments services, figures from its selectors (the same report as the page and the command)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.api import service_call
from agent.api_permissions import PolicyPermission
from agent.strategies import STRATEGIES
from annotations import policies
from annotations.exemplars.api import ExemplarSerializer
from annotations.experiments import selectors, services
from annotations.experiments.models import Candidate, CandidateItem, Experiment, Suite, SuiteVersion
from annotations.models import ExemplarSetVersion
from annotations.runs.models import Dataset, RunItem

_call = service_call  # a service call with its Django errors as DRF's


SOURCES_HELP = ('Sources of the questions, united in order: {"kind": "sample", "size": 20, "seed": 7, "db_ids": []}, '
                '{"kind": "failures", "run": 12, "categories": ["Selected Column"]}, {"kind": "picked", "questions": '
                '[0, 5]}, {"kind": "suite", "suite": "name", "version": 2}.')


# --- suites ----------------------------------------------------------------------------------------------------


class SuiteVersionSerializer(serializers.ModelSerializer):
    suite = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.StringRelatedField()

    class Meta:
        model = SuiteVersion
        fields = ["id", "suite", "number", "question_count", "recipe", "note", "created_by", "created_at"]
        read_only_fields = fields


class SuiteVersionDetailSerializer(SuiteVersionSerializer):
    questions = serializers.SerializerMethodField()

    class Meta(SuiteVersionSerializer.Meta):
        fields = [*SuiteVersionSerializer.Meta.fields, "questions"]
        read_only_fields = fields

    def get_questions(self, obj: SuiteVersion) -> list[dict]:
        """Each question in order, with every source it came from."""
        return [{"question_id": e.question_id, "index": e.question.index, "db_id": e.question.db_id,
                 "question": e.question.question, "origins": e.origins} for e in selectors.suite_entries(obj)]


class SuiteSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.StringRelatedField()
    versions = SuiteVersionSerializer(many=True, read_only=True)

    class Meta:
        model = Suite
        fields = ["id", "name", "dataset", "description", "created_by", "created_at", "versions"]
        read_only_fields = fields


class SourcesSerializer(serializers.Serializer):
    sources = serializers.ListField(child=serializers.DictField(), allow_empty=False, help_text=SOURCES_HELP)
    note = serializers.CharField(required=False, allow_blank=True, default="")


class SuiteCreateSerializer(SourcesSerializer):
    name = serializers.CharField(max_length=200)
    dataset = serializers.SlugRelatedField(slug_field="name", queryset=Dataset.objects.none())
    description = serializers.CharField(required=False, allow_blank=True, default="")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        self.fields["dataset"].queryset = policies.visible_datasets(request.user if request else None)


class SuiteViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                   viewsets.GenericViewSet):
    """Suites of questions (each version immutable): create one with its first version, or build its next."""

    serializer_class = SuiteSerializer
    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_create_suites, "versions": policies.can_create_suites}

    def get_queryset(self):
        return policies.visible_suites(self.request.user).select_related("dataset", "created_by").prefetch_related(
            "versions__created_by", "versions__suite").order_by("name")

    @extend_schema(request=SuiteCreateSerializer, responses={201: SuiteSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = SuiteCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        suite = _call(services.suite_create, name=data["name"], dataset=data["dataset"], user=request.user,
                      description=data["description"], sources=data["sources"], note=data["note"])
        return Response(SuiteSerializer(suite).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=SourcesSerializer, responses={201: SuiteVersionDetailSerializer})
    @action(detail=True, methods=["post"])
    def versions(self, request: Request, pk: str | None = None) -> Response:
        """The suite's next version from these sources."""
        suite = self.get_object()
        incoming = SourcesSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        version = _call(services.suite_version_create, suite=suite, sources=incoming.validated_data["sources"],
                        user=request.user, note=incoming.validated_data["note"])
        return Response(SuiteVersionDetailSerializer(version).data, status=status.HTTP_201_CREATED)


class SuiteVersionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Suite versions, with their questions and origins. ``?suite=<name>`` filters."""

    permission_classes = [IsAuthenticated, PolicyPermission]

    def get_queryset(self):
        qs = SuiteVersion.objects.filter(suite__in=policies.visible_suites(self.request.user)).select_related(
            "suite", "created_by").order_by("suite__name", "-number")
        if self.request.query_params.get("suite"):
            qs = qs.filter(suite__name=self.request.query_params["suite"])
        return qs

    def get_serializer_class(self):
        return SuiteVersionDetailSerializer if self.action == "retrieve" else SuiteVersionSerializer


# --- candidates --------------------------------------------------------------------------------------------------


class CandidateSerializer(serializers.ModelSerializer):
    exemplar_set = serializers.SlugRelatedField(slug_field="name", read_only=True)
    base_version = serializers.SlugRelatedField(slug_field="number", read_only=True)
    published_version = serializers.SlugRelatedField(slug_field="number", read_only=True)
    created_by = serializers.StringRelatedField()

    class Meta:
        model = Candidate
        fields = ["id", "exemplar_set", "number", "title", "state", "base_version", "published_version",
                  "created_by", "created_at", "updated_at"]
        read_only_fields = fields


class CandidateDetailSerializer(CandidateSerializer):
    content = serializers.SerializerMethodField()

    class Meta(CandidateSerializer.Meta):
        fields = [*CandidateSerializer.Meta.fields, "content"]
        read_only_fields = fields

    def get_content(self, obj: Candidate) -> dict:
        """Its items (with what each sends and its review state), the changes against the base version, the
        content hash and the system message's token count."""
        rows = selectors.candidate_rows(obj)
        content = selectors.candidate_content(obj, [r["item"] for r in rows])
        return {"items": [{"item": r["item"].pk, "exemplar": r["item"].exemplar_id, "sends": r["status"],
                           "state": r["state"], "approved": r["approved"], "question": r["content"].get("question"),
                           "database": r["content"].get("database")} for r in rows],
                "changes": selectors.candidate_changes(obj, content), "content_hash": content.content_hash,
                "tokens": selectors.candidate_token_count(content), "tool_description": content.tool_description}


class CandidateCreateSerializer(serializers.Serializer):
    exemplar_set = serializers.IntegerField(help_text="Id of the exemplar set.")
    title = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    exemplars = serializers.ListField(child=serializers.IntegerField(), required=False, default=list,
                                      help_text="Ids of exemplars to add (drafts too) to the latest published version.")


class CandidateAddSerializer(serializers.Serializer):
    exemplar = serializers.IntegerField()


class CandidateItemSerializer(serializers.Serializer):
    sends = serializers.ChoiceField(choices=["current", "published"],
                                    help_text="The exemplar's current content, or the base version's copy.")


class CandidatePublishSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="")
    confirm_regression = serializers.BooleanField(
        required=False, default=False,
        help_text="Needed when the latest finished experiment of exactly this content regressed.")


class CandidateViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                       viewsets.GenericViewSet):
    """Candidate versions of exemplar sets (drafts of the next version): never offered where published versions
    are. ``?set=<name>`` filters."""

    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_edit_candidates, "add": policies.can_edit_candidates,
                      "item": policies.can_edit_candidates, "discard": policies.can_edit_candidates,
                      "publish": policies.can_review_exemplars}

    def get_queryset(self):
        qs = policies.visible_candidates(self.request.user).select_related(
            "exemplar_set", "base_version", "published_version", "created_by").order_by("exemplar_set__name",
                                                                                       "-number")
        if self.request.query_params.get("set"):
            qs = qs.filter(exemplar_set__name=self.request.query_params["set"])
        return qs

    def get_serializer_class(self):
        return CandidateDetailSerializer if self.action == "retrieve" else CandidateSerializer

    @extend_schema(request=CandidateCreateSerializer, responses={201: CandidateDetailSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = CandidateCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        exemplar_set = policies.access_exemplar_set(request.user, data["exemplar_set"])
        found = policies.visible_exemplars(request.user).in_bulk(data["exemplars"])
        missing = [i for i in data["exemplars"] if i not in found]
        if missing:
            raise serializers.ValidationError({"exemplars": [f"No exemplar with id {i}." for i in missing]})
        candidate = _call(services.candidate_create, exemplar_set=exemplar_set, user=request.user,
                          title=data["title"], exemplars=[found[i] for i in data["exemplars"]])
        return Response(CandidateDetailSerializer(candidate).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=CandidateAddSerializer, responses={200: CandidateDetailSerializer})
    @action(detail=True, methods=["post"])
    def add(self, request: Request, pk: str | None = None) -> Response:
        """Append an exemplar's current content (a draft's too)."""
        candidate = self.get_object()
        incoming = CandidateAddSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        exemplar = policies.visible_exemplars(request.user).filter(pk=incoming.validated_data["exemplar"]).first()
        if exemplar is None:
            raise serializers.ValidationError({"exemplar": ["No such exemplar."]})
        _call(services.candidate_add, candidate=candidate, exemplar=exemplar, user=request.user)
        return Response(CandidateDetailSerializer(candidate).data)

    @extend_schema(methods=["PATCH"], request=CandidateItemSerializer, responses={200: CandidateDetailSerializer})
    @extend_schema(methods=["DELETE"], request=None, responses={200: CandidateDetailSerializer})
    @action(detail=True, methods=["patch", "delete"], url_path=r"items/(?P<item_id>\d+)")
    def item(self, request: Request, pk: str | None = None, item_id: str | None = None) -> Response:
        """``DELETE`` removes an exemplar; ``PATCH {"sends": "current"|"published"}`` chooses what it sends."""
        candidate = self.get_object()
        item = get_object_or_404(CandidateItem, pk=item_id, candidate=candidate)
        if request.method == "DELETE":
            _call(services.candidate_remove, candidate=candidate, item=item, user=request.user)
        else:
            incoming = CandidateItemSerializer(data=request.data)
            incoming.is_valid(raise_exception=True)
            _call(services.candidate_use_current, candidate=candidate, item=item, user=request.user,
                  current=incoming.validated_data["sends"] == "current")
        return Response(CandidateDetailSerializer(candidate).data)

    @extend_schema(request=CandidatePublishSerializer, responses={201: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"])
    def publish(self, request: Request, pk: str | None = None) -> Response:
        """Publish as the set's next version (answers the new version's id and number)."""
        candidate = self.get_object()
        incoming = CandidatePublishSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        version: ExemplarSetVersion = _call(services.candidate_publish, candidate=candidate, user=request.user,
                                            **incoming.validated_data)
        return Response({"id": version.pk, "exemplar_set": candidate.exemplar_set.name, "number": version.number,
                         "content_hash": version.content_hash}, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: CandidateSerializer})
    @action(detail=True, methods=["post"])
    def discard(self, request: Request, pk: str | None = None) -> Response:
        candidate = self.get_object()
        return Response(CandidateSerializer(_call(services.candidate_discard, candidate=candidate,
                                                  user=request.user)).data)


# --- experiments -------------------------------------------------------------------------------------------------


class ExperimentSerializer(serializers.ModelSerializer):
    exemplar_set = serializers.SlugRelatedField(slug_field="name", read_only=True)
    candidate = serializers.PrimaryKeyRelatedField(read_only=True)
    suite_version = serializers.PrimaryKeyRelatedField(read_only=True)
    baseline = serializers.CharField(source="baseline_label", read_only=True)
    created_by = serializers.StringRelatedField()
    runs = serializers.SerializerMethodField()

    class Meta:
        model = Experiment
        fields = ["id", "name", "exemplar_set", "candidate", "baseline", "baseline_version", "baseline_candidate",
                  "suite_version", "strategy", "options", "trials", "cancelled", "created_by", "created_at", "runs"]
        read_only_fields = fields

    def get_runs(self, obj: Experiment) -> list[dict]:
        return [{"arm": er.arm, "trial": er.trial, "run": er.run_id} for er in obj.runs.all()]


class ExperimentDetailSerializer(ExperimentSerializer):
    report = serializers.SerializerMethodField()

    class Meta(ExperimentSerializer.Meta):
        fields = [*ExperimentSerializer.Meta.fields, "report"]
        read_only_fields = fields

    def get_report(self, obj: Experiment) -> dict:
        """EX per trial and spread per arm, every question's outcome (flips, labels, tokens, cost, rounds), the
        verdict."""
        request = self.context.get("request")
        return selectors.report_as_dict(selectors.experiment_report(
            experiment=obj, user=request.user if request else None))


class ExperimentCreateSerializer(serializers.Serializer):
    candidate = serializers.IntegerField(help_text="Id of an open candidate version.")
    suite_version = serializers.IntegerField(required=False, allow_null=True, default=None,
                                             help_text="Id of a suite version; omitted: default_suite.")
    default_suite = serializers.BooleanField(
        required=False, default=False, help_text="The failures, with the same labels, of the run the candidate's "
                                                 "exemplar written from a labelled failure came from.")
    baseline_version = serializers.IntegerField(required=False, allow_null=True, default=None,
                                                help_text="Id of a published version of the set; default: its latest.")
    baseline_candidate = serializers.IntegerField(required=False, allow_null=True, default=None,
                                                  help_text="Or the id of another candidate of the set.")
    strategy = serializers.ChoiceField(choices=sorted(STRATEGIES), default="interactive_t2s")
    options = serializers.DictField(required=False, default=dict)
    trials = serializers.IntegerField(min_value=1, max_value=Experiment.MAX_TRIALS, default=1)
    max_concurrency = serializers.IntegerField(min_value=1, max_value=256, required=False, allow_null=True,
                                               default=None)
    spend_cap = serializers.FloatField(min_value=0, required=False, allow_null=True, default=None)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class ExperimentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                        viewsets.GenericViewSet):
    """Experiments: a candidate against a baseline on a suite, ``trials`` runs each; the report comes with the
    experiment. ``?set=<name>`` filters."""

    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_run_experiments, "cancel": policies.can_run_experiments}

    def get_queryset(self):
        qs = policies.visible_experiments(self.request.user).select_related(
            "exemplar_set", "baseline_version", "baseline_candidate", "created_by").prefetch_related("runs")
        if self.request.query_params.get("set"):
            qs = qs.filter(exemplar_set__name=self.request.query_params["set"])
        return qs

    def get_serializer_class(self):
        return ExperimentDetailSerializer if self.action == "retrieve" else ExperimentSerializer

    @extend_schema(request=ExperimentCreateSerializer, responses={201: ExperimentSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = ExperimentCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = dict(incoming.validated_data)
        candidate = _object(policies.visible_candidates(request.user), data.pop("candidate"), "candidate")
        launch = {"candidate": candidate, "user": request.user, "strategy": data["strategy"],
                  "options": data["options"], "trials": data["trials"], "max_concurrency": data["max_concurrency"],
                  "spend_cap": data["spend_cap"], "name": data["name"]}
        if data["baseline_version"] is not None:
            launch["baseline_version"] = _object(policies.visible_versions(request.user).filter(
                exemplar_set=candidate.exemplar_set), data["baseline_version"], "baseline_version")
        if data["baseline_candidate"] is not None:
            launch["baseline_candidate"] = _object(policies.visible_candidates(request.user),
                                                   data["baseline_candidate"], "baseline_candidate")
        if data["suite_version"] is not None:
            suite_version = _object(SuiteVersion.objects.filter(suite__in=policies.visible_suites(request.user)),
                                    data["suite_version"], "suite_version")
            policies.check_can_run_experiment(request.user, suite_version)
            experiment = _call(services.experiment_create, suite_version=suite_version, **launch)
        elif data["default_suite"]:
            default = selectors.default_suite_source(candidate)
            if default is None:
                raise serializers.ValidationError({"default_suite": [
                    "The candidate has no exemplar written from a labelled failure: give a suite_version."]})
            run = policies.access_run(request.user, default["run"])
            policies.check_can_create_suite(request.user, run.dataset)
            experiment = _call(services.experiment_create_on_failures, run=run, categories=default["categories"],
                               **launch)
        else:
            raise serializers.ValidationError({"suite_version": ["Give a suite version, or default_suite."]})
        return Response(ExperimentSerializer(experiment).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: ExperimentSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        experiment = self.get_object()
        policies.check_can_control_experiment(request.user, experiment)
        return Response(ExperimentSerializer(_call(services.experiment_cancel, experiment=experiment,
                                                   user=request.user)).data)


def _object(queryset, pk: int, field: str):
    found = queryset.filter(pk=pk).first()
    if found is None:
        raise serializers.ValidationError({field: [f"No {field.replace('_', ' ')} with id {pk}."]})
    return found


class FailureSerializer(serializers.Serializer):
    item = serializers.IntegerField(help_text="Id of a run item (a failure).")


class ExemplarFromFailureView(APIView):
    """"Write an exemplar for this": a draft exemplar from a labelled failure (question, the agent's trajectory,
    the corrected or gold SQL); its experiment suite defaults to the run's failures with the same labels."""

    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {None: policies.can_author_exemplars}

    @extend_schema(request=FailureSerializer, responses={201: ExemplarSerializer})
    def post(self, request: Request) -> Response:
        incoming = FailureSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        item = _object(RunItem.objects.filter(run__in=policies.visible_runs(request.user).values("pk")),
                       incoming.validated_data["item"], "item")
        exemplar = _call(services.exemplar_from_failure, item=item, user=request.user)
        return Response(ExemplarSerializer(exemplar).data, status=status.HTTP_201_CREATED)
