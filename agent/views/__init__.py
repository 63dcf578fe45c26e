from .account import account
from .audit import audit_list
from .databases import database_detail, database_list, database_refresh, database_register, home, table_rows
from .fidelity import fidelity
from .sessions import (
    ask,
    session_cancel,
    session_detail,
    session_feedback,
    session_follow_up,
    session_list,
    session_result_csv,
)
from .site import favicon
from .tools import tool_console
from .uploads import database_upload, import_job
from .workspaces import workspace_detail, workspace_list, workspace_member_add, workspace_member_remove

__all__ = [
    "account", "ask", "audit_list", "database_detail", "database_list", "database_refresh", "database_register",
    "database_upload", "favicon", "fidelity", "home", "import_job",
    "session_cancel", "session_detail", "session_feedback", "session_follow_up", "session_list",
    "session_result_csv", "table_rows", "tool_console",
    "workspace_detail", "workspace_list", "workspace_member_add", "workspace_member_remove",
]
