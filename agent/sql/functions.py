"""The functions a query on a target may call, per dialect: the one allowlist of the project.

The SQL guard (``guard.py``) checks every call of a statement against it on the parse tree, by the name as
written (``ifnull`` as ``ifnull``, ``"pg_sleep"`` as ``pg_sleep``); SQLite's authorizer checks every
``SQLITE_FUNCTION`` the engine resolves against the same list (``_sqlite_child.py``), so a call the parser
missed still meets the engine. Everything else is refused: ``set_config``, ``current_setting``,
``query_to_xml``, ``dblink*``, ``lo_*``, the ``pg_*`` file, signal, lock and admin functions,
``load_extension``, ``sqlite_*`` introspection...

A name may be listed that one engine does not have (``string_agg`` on SQLite, ``julianday`` on PostgreSQL):
the engine then answers "no such function", as it would without the app. Only harmless names are listed:
functions of their arguments (and of the clock), aggregates and window functions, with no side effect and
no access to the server beyond the rows the query reads.

Standard library only, and no imports: the SQLite query process (``python -I -S _sqlite_child.py``) loads
this file by its path.
"""

AGGREGATE = frozenset("""
count sum avg min max total group_concat string_agg array_agg bool_and bool_or every stddev stddev_pop
stddev_samp variance var_pop var_samp percentile_cont percentile_disc mode corr covar_pop covar_samp bit_and
bit_or median json_group_array json_group_object json_agg jsonb_agg json_object_agg
""".split())

WINDOW = frozenset("""
row_number rank dense_rank ntile lag lead first_value last_value nth_value percent_rank cume_dist
""".split())

STRING = frozenset("""
length char_length character_length octet_length bit_length lower upper trim ltrim rtrim btrim substr
substring replace instr position strpos concat concat_ws left right lpad rpad reverse repeat split_part
initcap format printf char chr ascii unicode quote hex like glob regexp_replace regexp_like regexp_matches
regexp_match regexp_substr starts_with translate md5 soundex to_char to_number string_to_array
array_to_string array_length cardinality unnest
""".split())

NUMBER = frozenset("""
abs round ceil ceiling floor trunc mod power pow sqrt exp ln log log10 log2 sign pi random cbrt degrees
radians sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh div width_bucket generate_series
""".split())

DATE = frozenset("""
date time datetime julianday strftime unixepoch date_part date_trunc extract age make_date make_time
year month day hour minute second quarter week dayofweek dayofmonth dayofyear weekday make_timestamp
justify_days justify_hours isfinite to_date to_timestamp current_date current_time current_timestamp
""".split())

CONDITIONAL = frozenset("coalesce ifnull nullif iif if greatest least typeof cast try_cast".split())

JSON = frozenset("""
json json_extract json_array json_object json_array_length json_type json_valid json_each json_tree
jsonb_extract_path jsonb_extract_path_text json_extract_path json_extract_path_text json_build_object
json_build_array to_json to_jsonb row_to_json
""".split())

COMMON = AGGREGATE | WINDOW | STRING | NUMBER | DATE | CONDITIONAL | JSON

# SQLite runs its operators ->, ->> (JSON), LIKE and GLOB as functions of these names, so its authorizer sees them;
# likely/unlikely/likelihood are planner hints; zeroblob/randomblob are bounded by the query process's memory cap.
SQLITE_ONLY = frozenset({"->", "->>", "likelihood", "likely", "unlikely", "zeroblob", "randomblob",
                         "sqlite_version"})

POSTGRES_ONLY = frozenset("""
now clock_timestamp statement_timestamp timeofday to_ascii overlay encode decode array_position array_positions
array_remove array_append array_cat array_upper array_lower string_to_table num_nulls num_nonnulls scale gcd lcm
factorial
""".split())

ALLOWED_FUNCTIONS = {
    "sqlite": COMMON | SQLITE_ONLY,
    "postgres": COMMON | POSTGRES_ONLY,
}
