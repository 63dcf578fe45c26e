"""Workspaces: the list, a workspace's page (members, databases) and its members managed by its admins."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agent import policies, selectors
from agent.forms import WorkspaceCreateForm, WorkspaceMemberForm, add_service_errors
from agent.services import workspaces as workspace_services


def workspace_list(request: HttpRequest) -> HttpResponse:
    form = WorkspaceCreateForm(request.POST or None)
    if request.method == "POST":
        policies.check_can_create_workspace(request.user)
        if form.is_valid():
            try:
                workspace = workspace_services.workspace_create(**form.cleaned_data, user=request.user)
            except ValidationError as exc:
                add_service_errors(form, exc)
            else:
                messages.success(request, f"Created the workspace {workspace.name}; you are its admin.")
                return redirect(workspace)
    return render(request, "agent/workspace_list.html", {
        "workspaces": selectors.workspace_list(user=request.user), "form": form,
        "can_create": policies.can_create_workspaces(request.user)})


def workspace_detail(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = policies.access_workspace(request.user, slug)
    return render(request, "agent/workspace_detail.html", {
        **selectors.workspace_overview(workspace=workspace, user=request.user),
        "workspace": workspace, "form": WorkspaceMemberForm(),
        "can_manage": policies.can_manage_workspace(request.user, workspace)})


def _holder(form: WorkspaceMemberForm) -> dict:
    name = form.cleaned_data["name"]
    if form.cleaned_data["kind"] == "group":
        group = Group.objects.filter(name=name).first()
        if group is None:
            raise ValidationError({"name": [f"No group called {name!r}."]})
        return {"group": group}
    user = User.objects.filter(username=name, is_active=True).first()
    if user is None:
        raise ValidationError({"name": [f"No active account called {name!r}."]})
    return {"user": user}


@require_POST
def workspace_member_add(request: HttpRequest, slug: str) -> HttpResponse:
    workspace = policies.access_workspace(request.user, slug)
    policies.check_can_manage_workspace(request.user, workspace)
    form = WorkspaceMemberForm(request.POST)
    if form.is_valid():
        try:
            holder = _holder(form)
            workspace_services.workspace_member_add(workspace=workspace, role=form.cleaned_data["role"],
                                                    by=request.user, **holder)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"{form.cleaned_data['name']} is now in {workspace.name} as "
                                      f"{form.cleaned_data['role']}: they see its databases, datasets and runs.")
            return redirect(workspace)
    return render(request, "agent/workspace_detail.html", {
        **selectors.workspace_overview(workspace=workspace, user=request.user),
        "workspace": workspace, "form": form, "can_manage": True}, status=400)


@require_POST
def workspace_member_remove(request: HttpRequest, slug: str, member_id: int) -> HttpResponse:
    workspace = policies.access_workspace(request.user, slug)
    policies.check_can_manage_workspace(request.user, workspace)
    membership = workspace.memberships.filter(pk=member_id).select_related("user", "group").first()
    if membership is None:
        messages.error(request, "No such member.")
        return redirect(workspace)
    holder = {"user": membership.user} if membership.user_id else {"group": membership.group}
    try:
        workspace_services.workspace_member_remove(workspace=workspace, **holder)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Removed {membership.user or membership.group} from {workspace.name}.")
    return redirect(workspace)
