"""The component's entry point: componentize-py exports ``Plugin``."""

from kubewasm_guest import export
from tenant_bootstrap import TenantBootstrap

Plugin = export(TenantBootstrap())
