//! What compiles, by argument and by the shape of the function: durations, keys, limiter
//! expressions, names, generics and `where` clauses, methods and their receivers. One module
//! per former case; `main` runs each module's `main`.

mod duration_strings {
    use ratelimit_runtime::{RateLimitError, rate_limit};

    #[rate_limit(period = "1ms", threshold = 1)]
    async fn shortest() -> Result<(), RateLimitError> {
        Ok(())
    }

    #[rate_limit(period = "1500ms", threshold = 10)]
    async fn millis() -> Result<(), RateLimitError> {
        Ok(())
    }

    #[rate_limit(period = "30s", threshold = 10)]
    async fn seconds() -> Result<(), RateLimitError> {
        Ok(())
    }

    #[rate_limit(period = "5m", threshold = 10)]
    async fn minutes() -> Result<(), RateLimitError> {
        Ok(())
    }

    #[rate_limit(period = "876600h", threshold = 4294967295)]
    async fn longest() -> Result<(), RateLimitError> {
        Ok(())
    }

    #[rate_limit(period = 3155760000, threshold = 4294967295)]
    async fn longest_in_seconds() -> Result<(), RateLimitError> {
        Ok(())
    }

    pub fn main() {
        let _ = (
            shortest(),
            millis(),
            seconds(),
            minutes(),
            longest(),
            longest_in_seconds(),
        );
    }
}

mod key_from_argument {
    use ratelimit_runtime::{RateLimitError, rate_limit};

    #[rate_limit(period = 60, threshold = 5, key = user_id)]
    async fn login(user_id: u64) -> Result<u64, RateLimitError> {
        Ok(user_id)
    }

    // The key borrows an argument that the body then moves.
    #[rate_limit(period = 60, threshold = 5, key = name.as_str())]
    async fn consume(name: String) -> Result<String, RateLimitError> {
        Ok(name)
    }

    pub fn main() {
        let _ = login(1);
        let _ = consume(String::new());
    }
}

mod limiter_expression {
    use std::sync::OnceLock;

    use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

    fn my_limiter() -> &'static Limiter {
        static LIMITER: OnceLock<Limiter> = OnceLock::new();
        LIMITER.get_or_init(Limiter::memory)
    }

    #[rate_limit(period = 60, threshold = 5, limiter = my_limiter())]
    async fn from_a_function() -> Result<(), RateLimitError> {
        Ok(())
    }

    #[rate_limit(period = 60, threshold = 5, limiter = limiter)]
    async fn from_an_argument(limiter: &Limiter) -> Result<(), RateLimitError> {
        Ok(())
    }

    pub fn main() {
        let _ = from_a_function();
        let limiter = Limiter::memory();
        let _ = from_an_argument(&limiter);
    }
}

mod name {
    use ratelimit_runtime::{RateLimitError, rate_limit};

    #[rate_limit(period = 60, threshold = 5, name = "login")]
    async fn login() -> Result<(), RateLimitError> {
        Ok(())
    }

    #[rate_limit(period = 60, threshold = 5, name = "login", key = 42)]
    async fn login_again() -> Result<(), RateLimitError> {
        Ok(())
    }

    pub fn main() {
        let _ = login();
        let _ = login_again();
    }
}

mod generic_where {
    use std::fmt::Display;

    use ratelimit_runtime::{RateLimitError, rate_limit};

    // `pub(crate)`, as a private type is at the crate root, where `show` was.
    #[derive(Debug)]
    pub(crate) enum AppError {
        Limited(RateLimitError),
    }

    impl From<RateLimitError> for AppError {
        fn from(err: RateLimitError) -> Self {
            AppError::Limited(err)
        }
    }

    pub(crate) type AppResult<T> = Result<T, AppError>;

    #[rate_limit(period = 60, threshold = 5, key = id)]
    pub(crate) async fn show<'a, T, K: Display>(value: &'a T, id: K) -> AppResult<&'a T>
    where
        T: Display + Sync + ?Sized,
    {
        Ok(value)
    }

    struct Wrapper<T>(T);

    impl<T: Clone + Send> Wrapper<T> {
        #[rate_limit(period = "2s", threshold = 1)]
        async fn get<U>(&self, _other: U) -> Result<T, AppError>
        where
            U: Into<T>,
        {
            Ok(self.0.clone())
        }
    }

    #[rate_limit(period = 60, threshold = 5)]
    async fn opaque() -> Result<impl Display, AppError> {
        Ok(5)
    }

    pub fn main() {
        let _ = show("x", 1);
        let _ = Wrapper(1u8).get(2u8);
        let _ = opaque();
    }
}

mod method_self {
    use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

    struct Service {
        tenant: String,
        limiter: Limiter,
    }

    impl Service {
        #[rate_limit(period = 60, threshold = 5, key = self.tenant, limiter = &self.limiter)]
        pub async fn call(&self, n: u32) -> Result<u32, RateLimitError> {
            Ok(n)
        }

        #[rate_limit(period = 60, threshold = 5)]
        async fn consume(self) -> Result<String, RateLimitError> {
            Ok(self.tenant)
        }

        #[rate_limit(period = 60, threshold = 5)]
        async fn mutate(&mut self) -> Result<(), RateLimitError> {
            self.tenant.push('!');
            Ok(())
        }
    }

    trait Greet {
        async fn greet(&self) -> Result<&'static str, RateLimitError>;
    }

    impl Greet for Service {
        #[rate_limit(period = 60, threshold = 5)]
        async fn greet(&self) -> Result<&'static str, RateLimitError> {
            Ok("hi")
        }
    }

    pub fn main() {
        let service = Service {
            tenant: "acme".to_owned(),
            limiter: Limiter::memory(),
        };
        let _ = service.call(1);
        let _ = service.greet();
    }
}

fn main() {
    duration_strings::main();
    key_from_argument::main();
    limiter_expression::main();
    name::main();
    generic_where::main();
    method_self::main();
}
