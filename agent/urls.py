from django.urls import path

from agent import views

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("ask/", views.ask, name="ask"),
    path("sessions/", views.session_list, name="session_list"),
    path("sessions/<int:pk>/", views.session_detail, name="session_detail"),
    path("sessions/<int:pk>/cancel/", views.session_cancel, name="session_cancel"),
    path("sessions/<int:pk>/feedback/", views.session_feedback, name="session_feedback"),
    path("sessions/<int:pk>/answer.csv", views.session_result_csv, name="session_result_csv"),
    path("sessions/<int:pk>/follow-up/", views.session_follow_up, name="session_follow_up"),
    path("tools/", views.tool_console, name="tool_console"),
    path("imports/<int:pk>/", views.import_job, name="import_job"),
    path("fidelity/", views.fidelity, name="fidelity"),
    path("account/", views.account, name="account"),
    path("audit/", views.audit_list, name="audit_list"),
    path("workspaces/", views.workspace_list, name="workspace_list"),
    path("workspaces/<str:slug>/", views.workspace_detail, name="workspace_detail"),
    path("workspaces/<str:slug>/members/", views.workspace_member_add, name="workspace_member_add"),
    path("workspaces/<str:slug>/members/<int:member_id>/remove/", views.workspace_member_remove,
         name="workspace_member_remove"),
    path("databases/", views.database_list, name="database_list"),
    path("databases/register/", views.database_register, name="database_register"),
    path("databases/upload/", views.database_upload, name="database_upload"),
    path("databases/<str:name>/", views.database_detail, name="database_detail"),
    path("databases/<str:name>/refresh/", views.database_refresh, name="database_refresh"),
    path("databases/<str:name>/tables/<str:table>/rows/", views.table_rows, name="table_rows"),
]
