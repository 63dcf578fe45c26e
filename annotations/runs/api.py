"""REST endpoints for datasets and runs (DRF): thin; every rule is in annotations.policies, every write a service."""

from __future__ import annotations

import io

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from agent import policies as agent_policies
from agent.api import ImportJobSerializer, ListCursorPagination, field_errors
from agent.api_permissions import PolicyPermission
from agent.strategies import STRATEGIES
from annotations import policies
from annotations.exemplars.selectors import published_versions
from annotations.runs import selectors, services, uploads
from annotations.runs.forms import MAX_PREDICTION_BYTES
from annotations.runs.models import Dataset, DatasetQuestion, MissingPredictions, Run, RunItem
from annotations.runs.pools import POOL_HELP


class DatasetSerializer(serializers.ModelSerializer):
    class Meta:
        model = Dataset
        fields = ["id", "name", "kind", "description", "patches", "question_count", "executable_count",
                  "created_at", "updated_at"]
        read_only_fields = fields


class QuestionSerializer(serializers.ModelSerializer):
    class Meta:
        model = DatasetQuestion
        fields = ["id", "index", "db_id", "question", "evidence", "gold_sql", "difficulty", "table_count",
                  "join_count"]
        read_only_fields = fields


def paginated(name: str, serializer: type[serializers.Serializer]):
    """The schema of a paginated list answered by a detail action (limit/offset: bounded by a dataset's size)."""
    return inline_serializer(name, {"count": serializers.IntegerField(),
                                    "next": serializers.URLField(allow_null=True),
                                    "previous": serializers.URLField(allow_null=True),
                                    "results": serializer(many=True)})


class DatasetUploadSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Dataset.Kind.choices)
    name = serializers.CharField(max_length=100)
    archive = serializers.FileField(required=False, help_text="A zip: dev.json with database/ or dev_databases/.")
    questions = serializers.FileField(required=False, help_text="Or Spider/BIRD JSON, JSONL or CSV questions...")
    databases = serializers.ListField(child=serializers.FileField(), required=False, default=list,
                                      help_text="... with one <db_id>.sqlite file per database.")
    workspace = serializers.CharField(required=False, allow_blank=True, default="",
                                      help_text="A workspace you belong to (its slug): its members see the dataset.")


class PredictionUploadSerializer(serializers.Serializer):
    """What the predictions form of the dataset page asks for, plus the choice for a short file."""

    name = serializers.CharField(max_length=200, help_text="e.g. the system that produced the predictions")
    format = serializers.ChoiceField(choices=["spider", "bird"],
                                     help_text='spider: one SQL per line (optional tab + db_id); bird: JSON '
                                               '{"0": "SQL\\t----- bird -----\\tdb_id"}.')
    file = serializers.FileField()
    missing = serializers.ChoiceField(
        choices=MissingPredictions.choices, required=False, allow_blank=True, default="",
        help_text="If the file has fewer predictions than the dataset has questions: score the missing ones as "
                  "wrong, or score the given subset only. Without it such a run waits for POST runs/{id}/missing/.")

    def validate_file(self, upload):
        if upload.size > MAX_PREDICTION_BYTES:
            raise serializers.ValidationError(
                f"The file is {upload.size // (1024 * 1024)} MB; prediction files up to "
                f"{MAX_PREDICTION_BYTES // (1024 * 1024)} MB are accepted.")
        return upload


class MissingChoiceSerializer(serializers.Serializer):
    choice = serializers.ChoiceField(choices=MissingPredictions.choices,
                                     help_text="wrong: missing questions count as failed; subset: they are left out.")


def _uploaded(upload) -> uploads.UploadedFile | None:
    return uploads.UploadedFile(upload.name, upload.size, upload.chunks()) if upload else None


class PredictionCountsSerializer(serializers.Serializer):
    questions = serializers.IntegerField()
    given = serializers.IntegerField()
    missing = serializers.IntegerField()
    malformed = serializers.IntegerField()
    extra = serializers.IntegerField()
    text = serializers.CharField(help_text='e.g. "500 predictions for 1034 questions: 534 missing"')
    choice = serializers.CharField(help_text="wrong, subset, or empty while no choice is made")
    choice_label = serializers.CharField()


class RunSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.StringRelatedField()
    predictions = serializers.SerializerMethodField(
        help_text="Imported runs: how the file covers the dataset (null for runs of our strategies).")
    awaits_missing_choice = serializers.SerializerMethodField(
        help_text="A short prediction file is not scored until the choice is made (POST runs/{id}/missing/).")

    class Meta:
        model = Run
        fields = ["id", "name", "dataset", "source", "strategy", "config", "source_file", "status", "error",
                  "import_issues", "missing_predictions", "predictions", "awaits_missing_choice", "totals",
                  "breakdowns", "evaluated_at", "created_by", "created_at"]
        read_only_fields = fields

    @extend_schema_field(PredictionCountsSerializer(allow_null=True))
    def get_predictions(self, run: Run):
        return selectors.prediction_counts(run=run)

    def get_awaits_missing_choice(self, run: Run) -> bool:
        return services.run_awaits_missing_choice(run)


def _workspace(user, slug: str):
    if not slug:
        return None
    workspace = agent_policies.member_workspaces(user).filter(slug=slug).first()
    if workspace is None:
        raise serializers.ValidationError({"workspace": ["No such workspace among yours."]})
    return workspace


class DatasetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Datasets. Upload one (multipart) to import it on a worker: the answer is the import job to follow."""

    serializer_class = DatasetSerializer
    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_import_datasets, "predictions": policies.can_upload_predictions}
    parser_classes = [MultiPartParser, FormParser, JSONParser]
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"

    def get_queryset(self):
        return policies.visible_datasets(self.request.user).order_by("name")

    @extend_schema(request={"multipart/form-data": DatasetUploadSerializer}, responses={202: ImportJobSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = DatasetUploadSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        try:
            job = uploads.dataset_upload_start(
                kind=data["kind"], name=data["name"], user=request.user, archive=_uploaded(data.get("archive")),
                questions=_uploaded(data.get("questions")), database_files=[_uploaded(f) for f in data["databases"]],
                workspace=_workspace(request.user, data["workspace"]))
        except DjangoValidationError as exc:
            raise field_errors(exc) from None
        return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
                   responses={200: paginated("PaginatedQuestionList", QuestionSerializer)})
    @action(detail=True, methods=["get"])
    def questions(self, request: Request, name: str | None = None) -> Response:
        """The dataset's questions with their gold SQL, in file order (paginated)."""
        dataset = self.get_object()
        page = self.paginate_queryset(dataset.questions.order_by("index"))
        return self.get_paginated_response(QuestionSerializer(page, many=True).data)


    @extend_schema(request={"multipart/form-data": PredictionUploadSerializer}, responses={201: RunSerializer})
    @action(detail=True, methods=["post"])
    def predictions(self, request: Request, name: str | None = None) -> Response:
        """Upload an external system's predictions (multipart) as a run, as the dataset page does. Malformed lines
        are reported in ``import_issues``; a short file is reported in ``predictions`` and scored only once the
        choice for its missing questions is made (``missing`` here, or POST runs/{id}/missing/)."""
        dataset = self.get_object()
        policies.check_can_upload_predictions(request.user, dataset)
        incoming = PredictionUploadSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        upload = data["file"]
        upload.seek(0)
        try:
            run = services.run_import_predictions(
                dataset=dataset, text=io.TextIOWrapper(upload.file, encoding="utf-8", newline=None), fmt=data["format"],
                name=data["name"], source_file=upload.name, user=request.user, evaluate_later=True,
                missing=data["missing"] or None)
        except DjangoValidationError as exc:
            raise serializers.ValidationError({"file": exc.messages}) from None
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)


class RunItemSerializer(serializers.ModelSerializer):
    index = serializers.IntegerField(source="question.index", read_only=True)
    db_id = serializers.CharField(source="question.db_id", read_only=True)
    question = serializers.CharField(source="question.question", read_only=True)
    gold_sql = serializers.CharField(source="question.gold_sql", read_only=True)
    difficulty = serializers.CharField(source="question.difficulty", read_only=True)

    class Meta:
        model = RunItem
        fields = ["id", "index", "db_id", "question", "gold_sql", "difficulty", "predicted_sql", "prediction_note",
                  "session", "eval_status", "ex", "soft_f1", "error", "gold_rows", "pred_rows", "pred_ms", "f_nc",
                  "f_sc"]
        read_only_fields = fields


class RunCreateSerializer(serializers.Serializer):
    dataset = serializers.SlugRelatedField(slug_field="name", queryset=Dataset.objects.none())
    name = serializers.CharField(max_length=200)
    strategy = serializers.ChoiceField(choices=sorted(STRATEGIES), default="interactive_t2s")
    options = serializers.DictField(required=False, default=dict,
                                    help_text='Strategy config overrides, e.g. {"max_rounds": 8}.')
    exemplar_set_version = serializers.PrimaryKeyRelatedField(
        queryset=published_versions(), required=False, allow_null=True, default=None,
        help_text="Id of a published exemplar set version; none: the paper's set for the dataset (Interactive-T2S).")
    zero_shot = serializers.BooleanField(required=False, default=False)
    paper_replica = serializers.BooleanField(required=False, default=False)
    db_ids = serializers.ListField(child=serializers.CharField(max_length=200), required=False, default=list,
                                   help_text="Only the questions of these databases.")
    limit = serializers.IntegerField(min_value=1, required=False, allow_null=True, default=None,
                                     help_text="Only N questions: the first N, or a random N (sample=random).")
    sample = serializers.ChoiceField(choices=["first", "random", "join-buckets"], default="first",
                                     help_text="With limit: the first N questions, or a random N drawn with seed; "
                                               "join-buckets: a random N (default 50) per tables-joined bucket 2, "
                                               "3 and 4+ (the paper's Table 10).")
    seed = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None,
                                    help_text="Seed of a random sample; drawn and stored on the run when omitted.")
    executable_only = serializers.BooleanField(
        required=False, default=False, help_text="Only questions whose database is available here (the others "
                                                 "cannot run and are not scored).")
    max_concurrency = serializers.IntegerField(min_value=1, max_value=64, required=False, allow_null=True,
                                               default=None)
    spend_cap = serializers.FloatField(min_value=0, required=False, allow_null=True, default=None)
    pool = serializers.CharField(max_length=300, required=False, allow_blank=True, default="", help_text=POOL_HELP)
    without = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list,
                                    max_length=20,
                                    help_text="Tools switched off for every question, e.g. [\"FindShortestPath\"] "
                                              "(the paper's Table 10 ablation).")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        self.fields["dataset"].queryset = policies.visible_datasets(request.user if request else None)
        # a version drawing on a database the user was not granted is "not found", like an unknown id
        self.fields["exemplar_set_version"].queryset = published_versions().filter(
            pk__in=policies.visible_versions(request.user if request else None).values("pk"))


class RunCursorPagination(ListCursorPagination):
    """Newest first."""

    ordering = ("-created_at", "-id")


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                 viewsets.GenericViewSet):
    """Runs: launch one of our strategies over a dataset, follow it, read its items, compare two, cancel or resume.
    Filter the list with ``?dataset=<name>``."""

    serializer_class = RunSerializer
    pagination_class = RunCursorPagination
    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_launch_runs, "cancel": policies.can_launch_runs,
                      "resume": policies.can_launch_runs, "missing": policies.can_upload_predictions}

    def get_queryset(self):
        qs = policies.visible_runs(self.request.user).select_related("dataset", "created_by").order_by("-created_at")
        if self.request.query_params.get("dataset"):
            qs = qs.filter(dataset__name=self.request.query_params["dataset"])
        return qs

    @extend_schema(request=RunCreateSerializer, responses={201: RunSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = RunCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = dict(incoming.validated_data)
        policies.check_can_launch_run(request.user, data["dataset"])
        try:
            run = services.run_create_agent(user=request.user, **{**data, "pool": data["pool"] or None})
        except DjangoValidationError as exc:
            raise field_errors(exc) from None
        return Response(RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[OpenApiParameter("outcome", str, description="correct, wrong, unscored, ..."),
                               OpenApiParameter("db_id", str), OpenApiParameter("limit", int),
                               OpenApiParameter("offset", int)],
                   responses={200: paginated("PaginatedRunItemList", RunItemSerializer)})
    @action(detail=True, methods=["get"], pagination_class=LimitOffsetPagination)  # bounded by the dataset's size
    def items(self, request: Request, pk: str | None = None) -> Response:
        """Per-question results (paginated), with the filters of the run page."""
        run = self.get_object()
        params = request.query_params
        qs = selectors.run_items(run=run, outcome=params.get("outcome", ""), db_id=params.get("db_id", ""))
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(RunItemSerializer(page, many=True).data)

    @extend_schema(request=None, responses={200: RunSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        policies.check_can_control_run(request.user, run)
        return Response(RunSerializer(services.run_cancel(run=run)).data)

    @extend_schema(request=None, responses={200: RunSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        policies.check_can_control_run(request.user, run)
        if run.source != Run.Source.AGENT:
            raise serializers.ValidationError({"run": ["Only runs of our strategies can be resumed."]})
        return Response(RunSerializer(services.run_resume(run=run)).data)

    @extend_schema(request=MissingChoiceSerializer, responses={200: RunSerializer})
    @action(detail=True, methods=["post"])
    def missing(self, request: Request, pk: str | None = None) -> Response:
        """A short prediction file's choice, stored on the run: its missing questions scored as ``wrong``, or only
        the given ``subset`` scored. Scoring starts then."""
        run = self.get_object()
        policies.check_can_upload_predictions(request.user, run.dataset)
        incoming = MissingChoiceSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        try:
            run = services.run_choose_missing(run=run, choice=incoming.validated_data["choice"])
        except DjangoValidationError as exc:
            raise serializers.ValidationError({"choice": exc.messages}) from None
        return Response(RunSerializer(run).data)

    @extend_schema(parameters=[OpenApiParameter("a", int, required=True), OpenApiParameter("b", int, required=True),
                               OpenApiParameter("kind", str, description="flips, fixed, broken, ...")],
                   responses={200: inline_serializer("RunComparison", {
                       "a": serializers.IntegerField(), "b": serializers.IntegerField(),
                       "counts": serializers.DictField(child=serializers.IntegerField()),
                       "common": serializers.IntegerField(), "only_a": serializers.IntegerField(),
                       "only_b": serializers.IntegerField(), "delta_ex": serializers.FloatField(allow_null=True),
                       "pairs": serializers.ListField(child=serializers.DictField())})})
    @action(detail=False, methods=["get"])
    def compare(self, request: Request) -> Response:
        """Two runs question by question: counts that add up, flips, and every pair (``?a=&b=&kind=``)."""
        errors = {k: ["A run id is required."] for k in ("a", "b") if not request.query_params.get(k, "").isdigit()}
        if errors:
            raise serializers.ValidationError(errors)
        a = policies.access_run(request.user, int(request.query_params["a"]))
        b = policies.access_run(request.user, int(request.query_params["b"]))
        comparison = selectors.run_compare(a=a, b=b, kind=request.query_params.get("kind", ""))
        pairs = [{"index": p["question"].index, "db_id": p["question"].db_id, "kind": p["kind"],
                  "a_outcome": p["word_a"], "b_outcome": p["word_b"], "a_sql": p["a"].predicted_sql,
                  "b_sql": p["b"].predicted_sql} for p in comparison["pairs"]]
        return Response({"a": a.pk, "b": b.pk, "counts": comparison["counts"], "common": comparison["common"],
                         "only_a": comparison["only_a"], "only_b": comparison["only_b"],
                         "delta_ex": comparison["delta_ex"], "pairs": pairs})

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def agreement(self, request: Request, pk: str | None = None) -> Response:
        """Agreement between the run's annotators on blind labels: Krippendorff's alpha overall and per error
        category, Cohen's kappa per pair, each with the number of questions it rests on (as on the agreement page)."""
        from annotations.labels import selectors as label_selectors

        run = self.get_object()
        annotators = list(label_selectors.run_annotators(run=run))
        figures = label_selectors.run_agreement(run=run, annotator_ids=[u.pk for u in annotators])
        return Response({"run": run.pk, "annotators": [u.get_username() for u in annotators],
                         "alpha": figures.get("alpha"), "items": figures["items"], "ratings": figures.get("ratings"),
                         "not_blind": figures.get("not_blind"), "pairs": figures.get("pairs", []),
                         "categories": [{"category": row["category"].key,
                                         **{k: v for k, v in row.items() if k != "category"}}
                                        for row in figures["rows"]]})
