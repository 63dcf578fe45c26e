"""REST endpoints of the agent app (DRF). Thin: serializers shape data, services do the work."""

from __future__ import annotations

from django.contrib.auth.models import Group, User
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.pagination import CursorPagination
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent import policies, selectors, services
from agent.api_permissions import PolicyPermission
from agent.models import (
    TURN_RECORD_FIELDS,
    AgentSession,
    AnswerFeedback,
    Database,
    ImportJob,
    Turn,
    Workspace,
    WorkspaceMembership,
)
from agent.services import feedback, few_shot, uploads
from agent.services import sessions as session_services
from agent.services import workspaces as workspace_services
from agent.strategies import FewShot
from agent.tools import registry


def field_errors(exc: DjangoValidationError) -> serializers.ValidationError:
    """A service's ValidationError as DRF field errors (``non_field_errors`` when it names no field)."""
    if hasattr(exc, "error_dict"):
        return serializers.ValidationError(exc.message_dict)
    return serializers.ValidationError({"non_field_errors": exc.messages})


def service_call(fn, **kwargs):
    """A service call with its Django errors as DRF's (field errors, 403)."""
    try:
        return fn(**kwargs)
    except DjangoValidationError as exc:
        raise field_errors(exc) from None
    except DjangoPermissionDenied as exc:
        raise PermissionDenied(str(exc)) from None


class ImportJobSerializer(serializers.ModelSerializer):
    class Meta:
        model = ImportJob
        fields = ["id", "kind", "name", "status", "stage", "done", "total", "percent", "error", "result_url",
                  "created_at", "finished_at"]
        read_only_fields = fields

    percent = serializers.IntegerField(read_only=True, allow_null=True)


class ImportJobViewSet(mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """An upload's import on a worker: poll it until ``status`` is done (``result_url``) or failed (``error``)."""

    serializer_class = ImportJobSerializer
    permission_classes = [permissions.IsAuthenticated, PolicyPermission]
    lookup_value_regex = r"[0-9]+"

    def get_object(self) -> ImportJob:
        return policies.access_import_job(self.request.user, int(self.kwargs["pk"]))

    def get_queryset(self):
        return ImportJob.objects.none()  # one job at a time, through the policy


class DatabaseUploadSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    file = serializers.FileField(help_text="A SQLite database file.")
    description = serializers.CharField(required=False, allow_blank=True, default="")


class DatabaseSerializer(serializers.ModelSerializer):
    location = serializers.CharField(source="display_location", read_only=True)

    class Meta:
        model = Database
        fields = ["id", "name", "engine", "location", "description", "is_demo", "status", "status_message",
                  "table_count", "column_count", "introspected_at", "index_status", "column_backend",
                  "created_at", "updated_at"]
        read_only_fields = fields


class DatabaseCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    location = serializers.CharField(max_length=2000, write_only=True,
                                     help_text="SQLite file path on the server, or a PostgreSQL DSN.")
    description = serializers.CharField(required=False, allow_blank=True, default="")


class DatabaseViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                      viewsets.GenericViewSet):
    serializer_class = DatabaseSerializer
    permission_classes = [permissions.IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_register_databases, "upload": policies.can_register_databases}
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9_.-]*"

    def get_queryset(self):
        return policies.visible_databases(self.request.user)

    @extend_schema(request=DatabaseCreateSerializer, responses={201: DatabaseSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = DatabaseCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        try:
            database = services.database_register(**incoming.validated_data, must_be_new=True,
                                                  user=request.user)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return Response(DatabaseSerializer(database).data, status=status.HTTP_201_CREATED)

    @extend_schema(request={"multipart/form-data": DatabaseUploadSerializer}, responses={201: DatabaseSerializer})
    @action(detail=False, methods=["post"], parser_classes=[MultiPartParser, FormParser, JSONParser])
    def upload(self, request: Request) -> Response:
        """Upload a SQLite file: kept in the app's data folder, checked, registered and granted to you."""
        incoming = DatabaseUploadSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        try:
            database = uploads.database_upload(chunks=data["file"].chunks(), size=data["file"].size,
                                               filename=data["file"].name, name=data["name"],
                                               description=data["description"], user=request.user)
        except DjangoValidationError as exc:
            raise field_errors(exc) from None
        return Response(DatabaseSerializer(database).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"], url_path="schema")
    def schema_detail(self, request: Request, name: str | None = None) -> Response:
        """Tables, columns, keys, row counts and column statistics, as stored at the last introspection."""
        database = self.get_object()
        return Response({"name": database.name, "status": database.status, "schema": database.schema})


class TurnSerializer(serializers.ModelSerializer):
    class Meta:
        model = Turn
        fields = [*(f for f in TURN_RECORD_FIELDS if f != "extra"), "created_at"]
        read_only_fields = fields


class SessionSerializer(serializers.ModelSerializer):
    database = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.StringRelatedField()

    class Meta:
        model = AgentSession
        fields = ["id", "database", "question", "evidence", "strategy", "config", "status", "final_sql", "result",
                  "error", "rounds", "tool_calls", "prompt_tokens", "completion_tokens", "cost", "llm_latency_ms",
                  "tool_latency_ms", "elapsed_ms", "cancel_requested", "attempts", "created_by", "created_at",
                  "started_at", "finished_at", "waiting_for_llm_since", "follow_up_of"]
        read_only_fields = fields

    def to_representation(self, instance: AgentSession) -> dict:
        """``config`` as the requester may read it: no exemplar text when the session's prompt is hidden from them
        (``policies.session_config_for``); with no request to tell who asks, hidden."""
        data = super().to_representation(instance)
        request = self.context.get("request")
        user = getattr(request, "user", None)
        if "prompt_rule" not in self.context:  # one per response: a list asks it once per row
            self.context["prompt_rule"] = policies.session_prompt_rule(user)
        data["config"] = policies.session_config_for(user, instance, rule=self.context["prompt_rule"])
        return data


class SessionDetailSerializer(SessionSerializer):
    turns = TurnSerializer(many=True, read_only=True)

    class Meta(SessionSerializer.Meta):
        fields = [*SessionSerializer.Meta.fields, "turns"]
        read_only_fields = fields


class AnswerFeedbackSerializer(serializers.ModelSerializer):
    author = serializers.StringRelatedField()

    class Meta:
        model = AnswerFeedback
        fields = ["id", "session", "author", "verdict", "corrected_sql", "corrected_preview", "note", "created_at",
                  "updated_at"]
        read_only_fields = fields


class AnswerFeedbackInSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=AnswerFeedback.Verdict.choices)
    corrected_sql = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=True)
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)


class FollowUpSerializer(serializers.Serializer):
    question = serializers.CharField(max_length=5000)


class AnswerRowsSerializer(serializers.Serializer):
    columns = serializers.ListField(child=serializers.CharField())
    rows = serializers.ListField(child=serializers.ListField())
    total_rows = serializers.IntegerField()


class SessionCreateSerializer(serializers.Serializer):
    database = serializers.SlugRelatedField(slug_field="name", queryset=Database.objects.all())
    question = serializers.CharField(max_length=4000)
    evidence = serializers.CharField(required=False, allow_blank=True, default="", max_length=4000)
    strategy = serializers.CharField(required=False, default="interactive_t2s")
    exemplar_set_version = serializers.IntegerField(
        required=False, allow_null=True, default=None,
        help_text="Id of a published exemplar set version (few-shot trajectories). None: interactive_t2s uses "
                  "the paper's 2-shot set that fits the database (Spider, or BIRD for a BIRD database).")
    zero_shot = serializers.BooleanField(required=False, default=False,
                                         help_text="No exemplars at all (overrides the default set).")
    paper_replica = serializers.BooleanField(
        required=False, default=False,
        help_text="The paper-replica preset: the paper's exemplars, the authors' observation formats and their "
                  "code's switches (interactive_t2s only).")
    options = serializers.DictField(required=False, default=dict,
                                    help_text="Strategy config overrides, e.g. {\"max_rounds\": 8, "
                                    "\"enabled_tools\": [\"SearchColumn\", \"ExecuteSQL\"]}.")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # A database the user was not granted is "not found", like an unknown name.
        request = self.context.get("request")
        self.fields["database"].queryset = policies.visible_databases(request.user if request else None)
    def validate_exemplar_set_version(self, value: int | None) -> FewShot | None:
        if value is None:
            return None
        request = self.context.get("request")
        found = few_shot.by_id(value, request.user if request else None)
        if found is None:
            raise serializers.ValidationError(f"No exemplar set version with id {value}.")
        return found



class ListCursorPagination(CursorPagination):
    """The API's long lists, by cursor: ``next``/``previous`` links carry the position, so page 5,000 costs what
    page 1 does (an offset re-read every earlier row). ``?page_size=`` up to 200. Each list sets its ordering."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class SessionCursorPagination(ListCursorPagination):
    """Newest first."""

    ordering = ("-created_at", "-id")


class TurnCursorPagination(CursorPagination):
    """A session's turns in order; ``?after=<index>`` starts after a turn the client already has."""

    ordering = ("index",)
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 500


class SessionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                     viewsets.GenericViewSet):
    """Agent sessions: create one (it runs on a worker), follow its turns, cancel it.

    The list is newest first, paginated by cursor (follow ``next``); filters ``?database=&status=&strategy=&model=``
    and ``?q=`` (question contains)."""

    permission_classes = [permissions.IsAuthenticated, PolicyPermission]
    # cancel and feedback: checked per session
    write_policies = {"create": policies.can_ask, "cancel": policies.can_view, "feedback": policies.can_view,
                      "follow_up": policies.can_ask}
    pagination_class = SessionCursorPagination

    def get_queryset(self):
        params = self.request.query_params
        user = self.request.user
        if self.action != "list":
            qs = policies.visible_sessions(user).select_related("database", "created_by")
            return qs.prefetch_related("turns") if self.action == "retrieve" else qs
        database = (policies.visible_databases(user).filter(name=params["database"]).first()
                    if params.get("database") else None)
        if params.get("database") and database is None:
            return AgentSession.objects.none()
        return selectors.session_list(viewer=user, database=database, status=params.get("status"),
                                      strategy=params.get("strategy"), model=params.get("model"),
                                      q=(params.get("q") or "")[:500])

    @extend_schema(responses={200: TurnSerializer(many=True)}, parameters=[OpenApiParameter(
        "after", OpenApiTypes.INT, description="Only the turns after this index (a live client polls with the last "
                                               "index it has).")])
    @action(detail=True, methods=["get"], pagination_class=TurnCursorPagination)
    def turns(self, request: Request, pk: str | None = None) -> Response:
        """The session's turns in order, by cursor; ``?after=<index>`` returns only later turns (a live client
        polls with the last index it has)."""
        session = self.get_object()
        qs = Turn.objects.filter(session=session)
        after = request.query_params.get("after", "")
        if after.lstrip("-").isdigit():
            qs = qs.filter(index__gt=int(after))
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(TurnSerializer(page, many=True).data)

    def get_serializer_class(self):
        return SessionDetailSerializer if self.action == "retrieve" else SessionSerializer

    @extend_schema(request=SessionCreateSerializer, responses={201: SessionSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = SessionCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        try:
            data = dict(incoming.validated_data)
            session = session_services.session_create(user=request.user, few_shot=data.pop("exemplar_set_version"),
                                                      **data)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return Response(SessionSerializer(session, context={"request": request}).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: SessionSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        session = self.get_object()
        policies.check_can_cancel_session(request.user, session)
        session = session_services.session_cancel(session=session)
        return Response(SessionSerializer(session, context={"request": request}).data)


    @extend_schema(methods=["GET"], responses={200: AnswerFeedbackSerializer(many=True)})
    @extend_schema(methods=["POST"], request=AnswerFeedbackInSerializer, responses={200: AnswerFeedbackSerializer})
    @action(detail=True, methods=["get", "post"], pagination_class=None)
    def feedback(self, request: Request, pk: str | None = None) -> Response:
        """Verdicts on the session's answer (right or wrong, with the corrected SQL and its first rows); ``POST``
        sets yours (the person who asked, or an Annotator). A corrected query is kept only once it ran read-only."""
        session = self.get_object()
        if request.method == "GET":
            rows = session.feedback.select_related("author")
            return Response(AnswerFeedbackSerializer(rows, many=True).data)
        policies.check_can_give_feedback(request.user, session)
        incoming = AnswerFeedbackInSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        row = service_call(feedback.answer_feedback_set, session=session, user=request.user,
                           **incoming.validated_data)
        return Response(AnswerFeedbackSerializer(row).data)

    @extend_schema(responses={200: AnswerRowsSerializer})
    @action(detail=True, methods=["get"], url_path="rows", pagination_class=None)
    def answer_rows(self, request: Request, pk: str | None = None) -> Response:
        """The answer's rows: the final query run again read-only, up to the query row limit (the session keeps
        only its first rows). The page offers the same as CSV."""
        result = service_call(feedback.answer_rows, session=self.get_object())
        data = result.to_json()
        return Response({"columns": data["columns"], "rows": data["rows"], "total_rows": data["total_rows"]})

    @extend_schema(request=FollowUpSerializer, responses={201: SessionSerializer})
    @action(detail=True, methods=["post"], url_path="follow-up")
    def follow_up(self, request: Request, pk: str | None = None) -> Response:
        """A follow-up question: a new session on the same database and strategy, linked to this one
        (``follow_up_of``), whose prompt carries the earlier questions and answers."""
        parent = self.get_object()
        policies.check_can_follow_up(request.user, parent)
        incoming = FollowUpSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        session = service_call(session_services.session_create, database=parent.database,
                               question=incoming.validated_data["question"], strategy=parent.strategy,
                               user=request.user, follow_up_of=parent)
        return Response(SessionSerializer(session, context={"request": request}).data, status=status.HTTP_201_CREATED)


class BudgetSerializer(serializers.Serializer):
    tokens_per_day = serializers.IntegerField(allow_null=True, help_text="None: no limit.")
    cost_per_day = serializers.FloatField(allow_null=True, help_text="None: no limit.")
    own_budget = serializers.BooleanField(help_text="The account's own budget rather than the default.")
    tokens_used_today = serializers.IntegerField()
    cost_used_today = serializers.FloatField()
    tokens_left = serializers.IntegerField(allow_null=True)
    cost_left = serializers.FloatField(allow_null=True)
    day_start = serializers.DateTimeField()
    resets_at = serializers.DateTimeField()


class AccountSerializer(serializers.Serializer):
    username = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    budget = BudgetSerializer()


class AccountView(APIView):
    """The signed-in account: its roles and its daily LLM budget with today's use (UTC day)."""

    permission_classes = [permissions.IsAuthenticated, PolicyPermission]

    @extend_schema(responses=AccountSerializer)
    def get(self, request: Request) -> Response:
        from agent.roles import ROLES
        from agent.services import budgets

        roles = sorted(request.user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        return Response({"username": request.user.get_username(), "roles": roles,
                         "budget": budgets.budget_status(request.user).to_dict()})


class ToolParamSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(help_text="As the model reads it, e.g. str | list[str].")
    required = serializers.BooleanField()
    default = serializers.JSONField(allow_null=True, help_text="The default when not required.")
    aliases = serializers.ListField(child=serializers.CharField(), help_text="Other names models use for it.")


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    heading = serializers.CharField(help_text="The call's signature as the prompt shows it.")
    description = serializers.CharField(help_text="The model-facing description ({dialect}: the target's SQL).")
    params = ToolParamSerializer(many=True)
    example = serializers.CharField(allow_blank=True)
    profiles = serializers.ListField(child=serializers.CharField(), help_text="Observation profiles it renders.")


def _tool_data(spec) -> dict:
    return {"name": spec.name, "heading": spec.heading(), "description": spec.description,
            "params": [{"name": p.name, "type": p.type, "required": p.required,
                        "default": None if p.required else p.default, "aliases": list(p.aliases)}
                       for p in spec.params],
            "example": spec.example, "profiles": list(spec.profiles)}


class ToolListView(APIView):
    """The agent's tools as the registry defines them (the same records dispatch, consoles and prompts use):
    name, signature, description, parameters with their aliases, an example call, observation profiles."""

    permission_classes = [permissions.IsAuthenticated, PolicyPermission]

    @extend_schema(responses=ToolSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response([_tool_data(spec) for spec in registry.specs()])


class WorkspaceMemberSerializer(serializers.Serializer):
    user = serializers.CharField(required=False, help_text="An account's user name (or give group).")
    group = serializers.CharField(required=False, help_text="A group's name (or give user).")
    role = serializers.ChoiceField(choices=WorkspaceMembership.Role.choices, default=WorkspaceMembership.Role.MEMBER)

    def validate(self, attrs):
        if bool(attrs.get("user")) == bool(attrs.get("group")):
            raise serializers.ValidationError("Give either user or group.")
        if attrs.get("user"):
            found = User.objects.filter(username=attrs["user"], is_active=True).first()
            if found is None:
                raise serializers.ValidationError({"user": ["No active account with this name."]})
            return {"user": found, "role": attrs["role"]}
        found = Group.objects.filter(name=attrs["group"]).first()
        if found is None:
            raise serializers.ValidationError({"group": ["No group with this name."]})
        return {"group": found, "role": attrs["role"]}


class WorkspaceSerializer(serializers.ModelSerializer):
    members = serializers.SerializerMethodField()
    databases = serializers.SerializerMethodField()

    class Meta:
        model = Workspace
        fields = ["slug", "name", "description", "members", "databases", "created_at"]
        read_only_fields = ["members", "databases", "created_at"]

    def get_members(self, workspace) -> list[dict]:
        return [{"user": m.user.username if m.user_id else None, "group": m.group.name if m.group_id else None,
                 "role": m.role} for m in workspace.memberships.select_related("user", "group")]

    def get_databases(self, workspace) -> list[str]:
        return list(workspace.databases.values_list("name", flat=True))


class WorkspaceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                       viewsets.GenericViewSet):
    """Workspaces you belong to. ``members/`` adds (or re-roles) a user or group, ``members/remove/`` removes
    one: the workspace's admins (and Data admins in it)."""

    serializer_class = WorkspaceSerializer
    permission_classes = [permissions.IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_create_workspaces, "members": policies.can_view,
                      "members_remove": policies.can_view}
    lookup_field = "slug"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9_.-]*"

    def get_queryset(self):
        return policies.member_workspaces(self.request.user)

    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = WorkspaceSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        workspace = service_call(workspace_services.workspace_create, user=request.user, **incoming.validated_data)
        return Response(WorkspaceSerializer(workspace).data, status=status.HTTP_201_CREATED)

    def _managed(self, slug: str) -> Workspace:
        workspace = policies.access_workspace(self.request.user, slug)
        try:
            policies.check_can_manage_workspace(self.request.user, workspace)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from None
        return workspace

    @extend_schema(request=WorkspaceMemberSerializer, responses={200: WorkspaceSerializer})
    @action(detail=True, methods=["post"])
    def members(self, request: Request, slug: str | None = None) -> Response:
        workspace = self._managed(slug)
        incoming = WorkspaceMemberSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        service_call(workspace_services.workspace_member_add, workspace=workspace, by=request.user,
                     **incoming.validated_data)
        return Response(WorkspaceSerializer(workspace).data)

    @extend_schema(request=WorkspaceMemberSerializer, responses={200: WorkspaceSerializer})
    @action(detail=True, methods=["post"], url_path="members/remove")
    def members_remove(self, request: Request, slug: str | None = None) -> Response:
        workspace = self._managed(slug)
        incoming = WorkspaceMemberSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = {k: v for k, v in incoming.validated_data.items() if k != "role"}
        service_call(workspace_services.workspace_member_remove, workspace=workspace, **data)
        return Response(WorkspaceSerializer(workspace).data)


class StrategyOptionSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(help_text="e.g. a whole number, a number, true or false, a list of strings.")
    default = serializers.JSONField(allow_null=True)
    min = serializers.FloatField(allow_null=True, help_text="Smallest value accepted (numbers), inclusive.")
    max = serializers.FloatField(allow_null=True, help_text="Largest value accepted (numbers), inclusive.")
    choices = serializers.ListField(child=serializers.JSONField(), allow_null=True)
    help = serializers.CharField(allow_blank=True)


class StrategySerializer(serializers.Serializer):
    name = serializers.CharField()
    title = serializers.CharField(help_text="The method's name as its paper writes it.")
    needs_pool = serializers.BooleanField(
        help_text="It retrieves its examples from an example pool: only a run over a dataset (with a pool) starts "
                  "it; a single question (POST sessions/, follow-up/) is refused with the reason.")
    options = StrategyOptionSerializer(many=True, help_text="Every option a session, run or experiment may set; "
                                                            "a value outside its bounds is refused.")


class StrategyListView(APIView):
    """The strategies and every option each one takes, as their configs declare them (type, default, bounds or
    choices, help): the same declarations that validate a session's, a run's and an experiment's options."""

    permission_classes = [permissions.IsAuthenticated, PolicyPermission]

    @extend_schema(responses=StrategySerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response(selectors.strategy_list())
