# Row-level security (docs/security.md): every application transaction runs as gleaner_app, a role
# without BYPASSRLS that owns nothing. The functions' shared role cannot create roles on Cloud SQL,
# so run this once as the postgres user, with db_bootstrap_sql, before the first deploy.
output "db_tenancy_bootstrap_sql" {
  description = "Run once as the postgres user: the non-owner role application transactions switch to."
  value = join("\n", [
    "CREATE ROLE gleaner_app NOLOGIN NOBYPASSRLS;",
    "GRANT gleaner_app TO ${var.database_role};",
  ])
}
