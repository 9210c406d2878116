-- Dashboard users (agents and admins) of an application. Passwords are stored only as scrypt
-- hashes (`src/crypto/password.ts`); an email is unique within its application, compared
-- without regard to case.
CREATE TABLE users (
  id bigint GENERATED ALWAYS AS IDENTITY,
  app_id bigint NOT NULL REFERENCES applications (id),
  email text NOT NULL,
  password_hash text NOT NULL,
  role text NOT NULL CHECK (role IN ('admin', 'agent')),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, id)
);
CREATE UNIQUE INDEX users_by_email ON users (app_id, lower(email));
