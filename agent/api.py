"""REST endpoints of the agent app (DRF). Thin: serializers shape data, services do the work."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agent import services
from agent.models import Database


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


class IsStaffForWrites(permissions.BasePermission):
    """Registering a database reads files on the server: only staff may do it."""

    def has_permission(self, request: Request, view) -> bool:
        return request.method in permissions.SAFE_METHODS or bool(request.user and request.user.is_staff)


class DatabaseViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                      viewsets.GenericViewSet):
    queryset = Database.objects.all()
    serializer_class = DatabaseSerializer
    permission_classes = [permissions.IsAuthenticated, IsStaffForWrites]
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9_.-]*"

    @extend_schema(request=DatabaseCreateSerializer, responses={201: DatabaseSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        incoming = DatabaseCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        if Database.objects.filter(name=incoming.validated_data["name"]).exists():
            raise serializers.ValidationError({"name": ["A database with this name is already registered."]})
        try:
            database = services.database_register(**incoming.validated_data)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return Response(DatabaseSerializer(database).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"], url_path="schema")
    def schema_detail(self, request: Request, name: str | None = None) -> Response:
        """Tables, columns, keys, row counts and column statistics, as stored at the last introspection."""
        database = self.get_object()
        return Response({"name": database.name, "status": database.status, "schema": database.schema})
