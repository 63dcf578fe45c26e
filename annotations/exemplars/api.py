"""REST endpoints for exemplars, exemplar sets and their versions (DRF): thin; rules in annotations.policies and
the exemplar services (authoring, review, publishing), imports in the importer."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from agent import policies as agent_policies
from agent.api import ListCursorPagination, service_call
from agent.api_permissions import PolicyPermission
from agent.models import Database
from annotations import policies
from annotations.models import Exemplar, ExemplarSet, ExemplarSetVersion, ExemplarStep

from . import selectors, services
from .importer import ImportProblem, import_upload

_call = service_call  # a service call with its Django errors as DRF's


class StepSerializer(serializers.ModelSerializer):
    class Meta:
        model = ExemplarStep
        fields = ["id", "position", "thought", "action", "observation", "ok", "stale", "ran_at"]
        read_only_fields = fields


class ExemplarSerializer(serializers.ModelSerializer):
    database = serializers.SlugRelatedField(slug_field="name", read_only=True)
    author = serializers.StringRelatedField()
    reviewer = serializers.StringRelatedField()

    class Meta:
        model = Exemplar
        fields = ["id", "database", "source_database", "question", "evidence", "final_sql", "notes", "tags",
                  "source", "state", "author", "reviewer", "submitted_at", "created_at", "updated_at"]
        read_only_fields = fields


class ExemplarDetailSerializer(ExemplarSerializer):
    steps = StepSerializer(many=True, read_only=True)

    class Meta(ExemplarSerializer.Meta):
        fields = [*ExemplarSerializer.Meta.fields, "schema_text", "steps"]
        read_only_fields = fields


class ExemplarCreateSerializer(serializers.Serializer):
    database = serializers.SlugRelatedField(slug_field="name", queryset=Database.objects.none(), allow_null=True,
                                            required=False, default=None)
    question = serializers.CharField(max_length=4000)
    evidence = serializers.CharField(required=False, allow_blank=True, default="", max_length=4000)
    notes = serializers.CharField(required=False, allow_blank=True, default="")
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        self.fields["database"].queryset = agent_policies.visible_databases(request.user if request else None)


class StepCreateSerializer(serializers.Serializer):
    thought = serializers.CharField(required=False, allow_blank=True, default="")
    action = serializers.CharField(help_text='e.g. SearchValue("Iron Maiden"), ExecuteSQL("SELECT ..."), Done.')
    run = serializers.BooleanField(required=False, default=True,
                                   help_text="Run the tool now on the exemplar's database and store its observation.")


class ExemplarUpdateSerializer(serializers.Serializer):
    """The fields to change (any left out stay as they are)."""

    question = serializers.CharField(required=False, max_length=4000)
    evidence = serializers.CharField(required=False, allow_blank=True, max_length=4000)
    notes = serializers.CharField(required=False, allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False)
    final_sql = serializers.CharField(required=False, allow_blank=True)


class StepUpdateSerializer(serializers.Serializer):
    """The step's thought and action (either left out stays as it is). A changed action clears its observation
    and makes the later ones stale; ``run`` runs its tool again at once."""

    thought = serializers.CharField(required=False, allow_blank=True)
    action = serializers.CharField(required=False)
    run = serializers.BooleanField(required=False, default=False)


class StepMoveSerializer(serializers.Serializer):
    offset = serializers.ChoiceField(choices=[-1, 1], help_text="-1 moves the step up, 1 down (Done stays last).")


class ReviewSerializer(serializers.Serializer):
    approve = serializers.BooleanField()
    comment = serializers.CharField(required=False, allow_blank=True, default="")


class ExemplarCursorPagination(ListCursorPagination):
    """Newest first."""

    ordering = ("-id",)


class ExemplarViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                      viewsets.GenericViewSet):
    """Exemplars (few-shot trajectories): write one, add, edit, run, move and delete steps with the real tools,
    submit, review. Filter the list with ``?state=approved``. Every edit goes through the services the page uses:
    only the author or a Curator edits, and an edit of a submitted or approved exemplar makes it a draft again."""

    pagination_class = ExemplarCursorPagination
    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_author_exemplars, "steps": policies.can_author_exemplars,
                      "partial_update": policies.can_author_exemplars, "step": policies.can_author_exemplars,
                      "step_run": policies.can_author_exemplars, "step_move": policies.can_author_exemplars,
                      "steps_rerun": policies.can_author_exemplars,
                      "submit": policies.can_author_exemplars, "review": policies.can_review_exemplars}

    def get_queryset(self):
        qs = policies.visible_exemplars(self.request.user).select_related("database", "author", "reviewer")
        if self.request.query_params.get("state"):
            qs = qs.filter(state=self.request.query_params["state"])
        if self.action == "retrieve":
            qs = qs.prefetch_related("steps")
        return qs.order_by("-id")

    def get_serializer_class(self):
        return ExemplarDetailSerializer if self.action == "retrieve" else ExemplarSerializer

    @extend_schema(request=ExemplarCreateSerializer, responses={201: ExemplarDetailSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = ExemplarCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        policies.check_can_author_exemplar(request.user)
        exemplar = _call(services.exemplar_create, user=request.user, **incoming.validated_data)
        return Response(ExemplarDetailSerializer(exemplar).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=StepCreateSerializer, responses={201: StepSerializer})
    @action(detail=True, methods=["post"])
    def steps(self, request: Request, pk: str | None = None) -> Response:
        """Append a step; its tool runs on the exemplar's database, so the observation is real."""
        exemplar = self.get_object()
        incoming = StepCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        step = _call(services.step_add, exemplar=exemplar, user=request.user, **incoming.validated_data)
        return Response(StepSerializer(step).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ExemplarUpdateSerializer, responses={200: ExemplarDetailSerializer})
    def partial_update(self, request: Request, *args, **kwargs) -> Response:
        """Change the question, evidence, notes, tags or final SQL."""
        exemplar = self.get_object()
        incoming = ExemplarUpdateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        fields = {"question": exemplar.question, "evidence": exemplar.evidence, "notes": exemplar.notes,
                  "tags": exemplar.tags, "final_sql": None, **incoming.validated_data}
        exemplar = _call(services.exemplar_update, exemplar=exemplar, user=request.user, **fields)
        return Response(ExemplarDetailSerializer(exemplar).data)

    def _step(self, step_id: str | None) -> ExemplarStep:
        return get_object_or_404(self.get_object().steps.select_related("exemplar__database"), pk=step_id)

    @extend_schema(methods=["PATCH"], request=StepUpdateSerializer, responses={200: StepSerializer})
    @extend_schema(methods=["DELETE"], request=None, responses={204: None})
    @action(detail=True, methods=["patch", "delete"], url_path=r"steps/(?P<step_id>[0-9]+)", url_name="step")
    def step(self, request: Request, pk: str | None = None, step_id: str | None = None) -> Response:
        """Edit a step (PATCH) or delete it (DELETE: the later ones move up and become stale)."""
        step = self._step(step_id)
        if request.method == "DELETE":
            _call(services.step_delete, step=step, user=request.user)
            return Response(status=status.HTTP_204_NO_CONTENT)
        incoming = StepUpdateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        step = _call(services.step_update, step=step, user=request.user, thought=data.get("thought", step.thought),
                     action=data.get("action", step.action))
        if data["run"]:
            step = _call(services.step_run, step=step, user=request.user)
        return Response(StepSerializer(step).data)

    @extend_schema(request=None, responses={200: StepSerializer})
    @action(detail=True, methods=["post"], url_path=r"steps/(?P<step_id>[0-9]+)/run", url_name="step-run")
    def step_run(self, request: Request, pk: str | None = None, step_id: str | None = None) -> Response:
        """Run the step's tool again on the exemplar's database and store the observation."""
        step = _call(services.step_run, step=self._step(step_id), user=request.user)
        return Response(StepSerializer(step).data)

    @extend_schema(request=StepMoveSerializer, responses={200: ExemplarDetailSerializer})
    @action(detail=True, methods=["post"], url_path=r"steps/(?P<step_id>[0-9]+)/move", url_name="step-move")
    def step_move(self, request: Request, pk: str | None = None, step_id: str | None = None) -> Response:
        """Swap the step with its neighbour; the observations after them become stale."""
        step = self._step(step_id)
        incoming = StepMoveSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        _call(services.step_move, step=step, user=request.user, offset=incoming.validated_data["offset"])
        return Response(ExemplarDetailSerializer(self.get_object()).data)

    @extend_schema(request=None, responses={200: ExemplarDetailSerializer})
    @action(detail=True, methods=["post"], url_path="steps/rerun", url_name="steps-rerun")
    def steps_rerun(self, request: Request, pk: str | None = None) -> Response:
        """Run again every stale or never-run step, in order."""
        exemplar = self.get_object()
        _call(services.exemplar_rerun_stale, exemplar=exemplar, user=request.user)
        return Response(ExemplarDetailSerializer(self.get_object()).data)

    @extend_schema(request=None, responses={200: ExemplarDetailSerializer})
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str | None = None) -> Response:
        exemplar = _call(services.exemplar_submit, exemplar=self.get_object(), user=request.user)
        return Response(ExemplarDetailSerializer(exemplar).data)

    @extend_schema(request=ReviewSerializer, responses={200: ExemplarDetailSerializer})
    @action(detail=True, methods=["post"])
    def review(self, request: Request, pk: str | None = None) -> Response:
        exemplar = self.get_object()
        incoming = ReviewSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        exemplar = _call(services.exemplar_review, exemplar=exemplar, user=request.user, **incoming.validated_data)
        return Response(ExemplarDetailSerializer(exemplar).data)


class VersionSerializer(serializers.ModelSerializer):
    exemplar_set = serializers.SlugRelatedField(slug_field="name", read_only=True)
    exemplar_count = serializers.IntegerField(read_only=True)
    created_by = serializers.StringRelatedField()

    class Meta:
        model = ExemplarSetVersion
        fields = ["id", "exemplar_set", "number", "exemplar_count", "content_hash", "note", "source", "created_by",
                  "created_at"]
        read_only_fields = fields


class VersionDetailSerializer(VersionSerializer):
    class Meta(VersionSerializer.Meta):
        fields = [*VersionSerializer.Meta.fields, "tool_description", "tool_description_no_findpath", "exemplars"]
        read_only_fields = fields


class SetSerializer(serializers.ModelSerializer):
    created_by = serializers.StringRelatedField()
    workspace = serializers.SlugRelatedField(slug_field="slug", read_only=True,
                                             help_text="Its members see the set; null: whoever sees one of its "
                                                       "versions.")
    versions = serializers.SerializerMethodField()

    class Meta:
        model = ExemplarSet
        fields = ["id", "name", "description", "workspace", "created_by", "created_at", "versions"]
        read_only_fields = fields

    def get_versions(self, obj: ExemplarSet) -> list[int]:
        """Ids of the set's versions the reader may see (every database they draw on granted), newest first."""
        visible = self.context.get("visible_versions")
        return [v.pk for v in sorted(obj.versions.all(), key=lambda v: -v.number)
                if visible is not None and v.pk in visible]


class SetCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    workspace = serializers.CharField(
        required=False, allow_blank=True, max_length=100,
        help_text="A workspace you belong to (its slug): its members see the set. \"\": none; omitted: your only "
                  "workspace when you have exactly one.")


class PublishSerializer(serializers.Serializer):
    exemplars = serializers.ListField(child=serializers.IntegerField(), allow_empty=False,
                                      help_text="Ids of approved exemplars, in prompt order.")
    tool_description = serializers.CharField(required=False, allow_blank=True, default="")
    note = serializers.CharField(required=False, allow_blank=True, default="")


class SetUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A .zip of the authors' prompt folder, or a .json set export.")
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    workspace = serializers.CharField(
        required=False, allow_blank=True, max_length=100,
        help_text="A workspace you belong to (its slug): its members see the set. \"\": none; omitted: your only "
                  "workspace when you have exactly one.")


class ExemplarSetViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                         viewsets.GenericViewSet):
    """Exemplar sets: create one, publish approved exemplars as a new immutable version, or upload a whole set."""

    serializer_class = SetSerializer
    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_create_sets, "publish": policies.can_review_exemplars,
                      "upload": policies.can_import_exemplars}

    def get_queryset(self):
        if not agent_policies.can_view(self.request.user):
            return ExemplarSet.objects.none()
        return selectors.set_list(self.request.user).select_related("created_by")

    def get_serializer_context(self) -> dict:
        context = super().get_serializer_context()
        context["visible_versions"] = set(policies.visible_versions(self.request.user).values_list("pk", flat=True))
        return context

    @extend_schema(request=SetCreateSerializer, responses={201: SetSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = SetCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        policies.check_can_create_set(request.user)
        exemplar_set = _call(services.set_create, user=request.user, **incoming.validated_data)
        return Response(SetSerializer(exemplar_set).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=PublishSerializer, responses={201: VersionDetailSerializer})
    @action(detail=True, methods=["post"])
    def publish(self, request: Request, pk: str | None = None) -> Response:
        exemplar_set = self.get_object()
        incoming = PublishSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        found = policies.visible_exemplars(request.user).in_bulk(data["exemplars"])
        missing = [i for i in data["exemplars"] if i not in found]
        if missing:
            raise serializers.ValidationError({"exemplars": [f"No exemplar with id {i}." for i in missing]})
        version = _call(services.set_publish, exemplar_set=exemplar_set, user=request.user,
                        exemplars=[found[i] for i in data["exemplars"]], tool_description=data["tool_description"],
                        note=data["note"], source="api")
        return Response(VersionDetailSerializer(version).data, status=status.HTTP_201_CREATED)

    @extend_schema(request={"multipart/form-data": SetUploadSerializer}, responses={201: VersionSerializer(many=True)})
    @action(detail=False, methods=["post"], parser_classes=[MultiPartParser, FormParser, JSONParser])
    def upload(self, request: Request) -> Response:
        """Import a set (the authors' prompt folder zipped, or a JSON export) as a new set with its first version."""
        incoming = SetUploadSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        upload = incoming.validated_data["file"]
        try:
            result = import_upload(chunks=upload.chunks(), size=upload.size, filename=upload.name,
                                   name=incoming.validated_data["name"] or None, user=request.user,
                                   workspace=incoming.validated_data.get("workspace"))
        except ImportProblem as exc:
            raise serializers.ValidationError({"file": exc.problems}) from None
        return Response(VersionSerializer(result.versions, many=True).data, status=status.HTTP_201_CREATED)


class ExemplarSetVersionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Published set versions (immutable): their frozen exemplars and tool description. ``?set=<name>`` filters."""

    permission_classes = [IsAuthenticated, PolicyPermission]

    def get_queryset(self):
        if not agent_policies.can_view(self.request.user):
            return ExemplarSetVersion.objects.none()
        qs = policies.visible_versions(self.request.user).select_related("exemplar_set", "created_by").order_by(
            "exemplar_set__name", "-number")
        if self.request.query_params.get("set"):
            qs = qs.filter(exemplar_set__name=self.request.query_params["set"])
        return qs

    def get_serializer_class(self):
        return VersionDetailSerializer if self.action == "retrieve" else VersionSerializer
