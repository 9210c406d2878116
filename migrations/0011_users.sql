-- Dashboard users (agents and admins) of an application. Passwords are stored only as scrypt
-- hashes (`src/crypto/password.ts`); an email is unique within its application by its key
-- (`emailKey` in `src/domain/user.ts`: Unicode-normalized and lowercased by Parley, since
-- PostgreSQL's lower() depends on the database's locale and folds only ASCII under C).
CREATE TABLE users (
  id bigint GENERATED ALWAYS AS IDENTITY,
  app_id bigint NOT NULL REFERENCES applications (id),
  email text NOT NULL,
  email_key text NOT NULL,
  password_hash text NOT NULL,
  role text NOT NULL CHECK (role IN ('admin', 'agent')),
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (app_id, id)
);
CREATE UNIQUE INDEX users_by_email ON users (app_id, email_key);
