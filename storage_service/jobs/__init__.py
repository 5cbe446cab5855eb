"""The gateway's background jobs: their claims and saved progress (DESIGN §4.8).

Owns `background_jobs` (migration 0012). `repository` holds the SQL; `service`
runs ClaimJob and RenewJob; `wire` holds their wire forms; Transact checks a claim
and saves a run's progress with the repository (`storage_service.transact`).
"""

__all__ = ["repository", "service", "wire"]
