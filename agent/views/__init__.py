from .databases import database_detail, database_list, database_refresh, database_register, home, table_rows
from .sessions import ask, session_cancel, session_detail, session_list
from .tools import tool_console

__all__ = [
    "ask", "database_detail", "database_list", "database_refresh", "database_register", "home",
    "session_cancel", "session_detail", "session_list", "table_rows", "tool_console",
]
