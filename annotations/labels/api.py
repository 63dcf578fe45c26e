"""REST endpoints for labels (DRF): list with filters, create, update one's own. Services enforce the rules."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from agent.api import ListCursorPagination, field_errors
from agent.api_permissions import PolicyPermission
from annotations import policies
from annotations.labels import services
from annotations.labels.models import Category, Label, Queue, TaxonomyVersion
from annotations.runs.models import Run, RunItem


class LabelSerializer(serializers.ModelSerializer):
    run = serializers.IntegerField(source="item.run_id", read_only=True)
    category_key = serializers.CharField(source="category.key", read_only=True)
    annotator = serializers.CharField(source="annotator.get_username", read_only=True)
    taxonomy = serializers.CharField(source="taxonomy_version.taxonomy.name", read_only=True)
    taxonomy_version_number = serializers.IntegerField(source="taxonomy_version.number", read_only=True)

    class Meta:
        model = Label
        fields = ["id", "run", "item", "category", "category_key", "taxonomy", "taxonomy_version_number",
                  "annotator", "note", "corrected_sql", "corrected_ok", "corrected_row_count", "corrected_preview",
                  "corrected_error", "is_final", "blind", "created_at", "updated_at"]
        read_only_fields = ["corrected_ok", "corrected_row_count", "corrected_preview", "corrected_error",
                            "is_final", "blind", "created_at", "updated_at"]


class LabelCreateSerializer(serializers.Serializer):
    item = serializers.PrimaryKeyRelatedField(queryset=RunItem.objects.none())
    category = serializers.PrimaryKeyRelatedField(queryset=Category.objects.all())
    note = serializers.CharField(required=False, allow_blank=True, default="")
    corrected_sql = serializers.CharField(required=False, allow_blank=True, default="")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # An item of a run the user may not see is "does not exist", like an unknown id.
        request = self.context.get("request")
        visible = policies.visible_runs(request.user if request else None).values("pk")
        self.fields["item"].queryset = RunItem.objects.select_related("question__database").filter(run__in=visible)


class FinalLabelSerializer(LabelCreateSerializer):
    note = None
    corrected_sql = None
    final = serializers.BooleanField(default=True, help_text="true: make the category a final label of the item; "
                                                             "false: take it away.")


class LabelUpdateSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True)
    corrected_sql = serializers.CharField(required=False, allow_blank=True)


class LabelCursorPagination(ListCursorPagination):
    """By question, then category."""

    ordering = ("item_id", "category__position", "id")


class LabelViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                   mixins.UpdateModelMixin, viewsets.GenericViewSet):
    """Labels. Filters: ``?run=<id>&category=<key>&annotator=<username>&item=<id>``. In a blind queue, other
    annotators' labels on a question are listed only once you labelled it and revealed them, or it was
    adjudicated (adjudicators see all)."""

    serializer_class = LabelSerializer
    pagination_class = LabelCursorPagination
    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_label, "update": policies.can_label,
                      "partial_update": policies.can_label, "final": policies.can_adjudicate}

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user, maybe no tables yet
            return Label.objects.none()
        # Blind queues: other annotators' labels stay hidden here exactly as on the pages.
        qs = (policies.hide_blind_labels(self.request.user, policies.visible_labels(self.request.user))
              .select_related("item", "category", "annotator", "taxonomy_version__taxonomy")
              .order_by("item_id", "category__position", "id"))
        params = self.request.query_params
        if params.get("run", "").isdigit():
            qs = qs.filter(item__run_id=params["run"])
        if params.get("item", "").isdigit():
            qs = qs.filter(item_id=params["item"])
        if params.get("category"):
            qs = qs.filter(category__key=params["category"])
        if params.get("annotator"):
            qs = qs.filter(annotator__username=params["annotator"])
        return qs

    @extend_schema(request=LabelCreateSerializer, responses={201: LabelSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = LabelCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        if Label.objects.filter(item=data["item"], category=data["category"], annotator=request.user,
                                is_final=False).exists():
            raise serializers.ValidationError({"category": ["You already gave this label."]})
        try:
            with transaction.atomic():  # a refused corrected query takes the new label back with it
                label = services.label_toggle(item=data["item"], category=data["category"], user=request.user,
                                              note=data["note"])
                if data["corrected_sql"]:
                    label = services.label_update(label=label, user=request.user,
                                                  corrected_sql=data["corrected_sql"])
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        except services.LabelConflict as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except DjangoValidationError as exc:
            raise serializers.ValidationError({"corrected_sql": exc.messages}) from exc
        return Response(LabelSerializer(label).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=LabelUpdateSerializer, responses={200: LabelSerializer})
    def update(self, request: Request, *args, **kwargs) -> Response:
        label = self.get_object()
        incoming = LabelUpdateSerializer(data=request.data, partial=True)
        incoming.is_valid(raise_exception=True)
        try:
            label = services.label_update(label=label, user=request.user, **incoming.validated_data)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        except DjangoValidationError as exc:
            raise serializers.ValidationError({"corrected_sql": exc.messages}) from exc
        return Response(LabelSerializer(label).data)


    @extend_schema(request=FinalLabelSerializer, responses={200: inline_serializer("FinalLabels", {
        "item": serializers.IntegerField(), "category": serializers.IntegerField(), "final": serializers.BooleanField(),
        "final_labels": LabelSerializer(many=True)})})
    @action(detail=False, methods=["post"])
    def final(self, request: Request) -> Response:
        """Adjudication: set (``final: true``) or unset (``false``) one category of an item's final labels, as the
        adjudication keys of the review page do. Answers the item's final labels after the change."""
        incoming = FinalLabelSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        try:
            services.label_final_set(item=data["item"], category=data["category"], user=request.user,
                                     final=data["final"])
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        finals = (policies.hide_blind_labels(request.user, policies.visible_labels(request.user))
                  .filter(item=data["item"], is_final=True)
                  .select_related("item", "category", "annotator", "taxonomy_version__taxonomy")
                  .order_by("category__position", "id"))
        return Response({"item": data["item"].pk, "category": data["category"].pk, "final": data["final"],
                         "final_labels": LabelSerializer(finals, many=True).data})


class QueueSerializer(serializers.ModelSerializer):
    taxonomy = serializers.CharField(source="taxonomy_version.taxonomy.name", read_only=True)
    taxonomy_version_number = serializers.IntegerField(source="taxonomy_version.number", read_only=True)
    assignees = serializers.SlugRelatedField(slug_field="username", many=True, read_only=True)
    created_by = serializers.StringRelatedField()

    class Meta:
        model = Queue
        fields = ["id", "name", "run", "taxonomy", "taxonomy_version_number", "db_id", "difficulty", "join_count",
                  "max_annotators", "blind", "assignees", "guidelines", "created_by", "created_at"]
        read_only_fields = fields


class QueueCreateSerializer(serializers.Serializer):
    """What the queue form on the queues page asks for."""

    name = serializers.CharField(max_length=200)
    run = serializers.PrimaryKeyRelatedField(queryset=Run.objects.none(), help_text="Id of a run.")
    taxonomy_version = serializers.PrimaryKeyRelatedField(queryset=TaxonomyVersion.objects.all(),
                                                          help_text="Id of a taxonomy version.")
    db_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                  help_text="Only the run's failures on this database.")
    difficulty = serializers.CharField(max_length=20, required=False, allow_blank=True, default="")
    join_count = serializers.IntegerField(min_value=0, max_value=32767, required=False, allow_null=True, default=None)
    max_annotators = serializers.IntegerField(min_value=1, max_value=32767, required=False, default=1,
                                              help_text="How many people may label one question.")
    blind = serializers.BooleanField(required=False, default=True,
                                     help_text="With several annotators: each sees the others' labels only after "
                                               "labelling the question (or after adjudication).")
    assignees = serializers.SlugRelatedField(slug_field="username", many=True, required=False, default=list,
                                             queryset=get_user_model().objects.all(),
                                             help_text="Usernames; empty: anyone who may label.")
    guidelines = serializers.CharField(required=False, allow_blank=True, default="", max_length=20_000,
                                       help_text="Instructions shown to the queue's annotators.")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        self.fields["run"].queryset = policies.visible_runs(request.user if request else None)


class QueueViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Label queues (which failures of a run go to whom). ``?run=<id>`` filters. Curators create them (POST)."""

    serializer_class = QueueSerializer
    permission_classes = [IsAuthenticated, PolicyPermission]
    write_policies = {"create": policies.can_create_queues}

    def get_queryset(self):
        qs = (policies.visible_queues(self.request.user)
              .select_related("taxonomy_version__taxonomy", "created_by").prefetch_related("assignees")
              .order_by("-id"))
        if self.request.query_params.get("run", "").isdigit():
            qs = qs.filter(run_id=self.request.query_params["run"])
        return qs

    @extend_schema(request=QueueCreateSerializer, responses={201: QueueSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = QueueCreateSerializer(data=request.data, context={"request": request})
        incoming.is_valid(raise_exception=True)
        try:
            queue = services.queue_create(user=request.user, **incoming.validated_data)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from exc
        except DjangoValidationError as exc:
            raise field_errors(exc) from None
        return Response(QueueSerializer(queue).data, status=status.HTTP_201_CREATED)
