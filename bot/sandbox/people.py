"""The sandbox's people, matching the bundled example policy's user ids."""

from __future__ import annotations

REQUESTER = "U0ALICE"
RELEASE_MANAGER = "U0REL1"
RELEASE_MANAGER_2 = "U0REL2"
SECURITY = "U0SEC1"
OUTSIDER = "U0MALLORY"
GROUP_ONLY = "U0GINA"  # a release manager through the user group only
ADMIN = "U0OPS1"  # the policy's admins role: may cancel anyone's run, approves nothing
CHANNEL = "C0CHANGES"

USERS = {
    REQUESTER: "alice",
    RELEASE_MANAGER: "ravi",
    RELEASE_MANAGER_2: "rosa",
    SECURITY: "sam",
    OUTSIDER: "mallory",
    GROUP_ONLY: "gina",
    ADMIN: "olga",
}
USERGROUPS = {"S0RELMGR": [RELEASE_MANAGER, RELEASE_MANAGER_2, GROUP_ONLY]}
