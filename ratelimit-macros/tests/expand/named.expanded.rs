// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

async fn login(user_id: u64, password: String) -> Result<Session, AppError> {
    {
        fn __ratelimit() {}
        ::ratelimit_runtime::__private::inventory::submit! {
            ::ratelimit_runtime::__private::Declaration { name :
            ::core::option::Option::Some("login"), function : { fn __ratelimit_scope() ->
            & 'static ::core::primitive::str {
            ::ratelimit_runtime::__private::scope_from_item_path(::ratelimit_runtime::__private::type_name_of(&
            __ratelimit),) } __ratelimit_scope }, position :
            ::core::option::Option::None, rate : ::core::option::Option::Some(const {
            ::ratelimit_runtime::Rate::new_const(5,
            ::ratelimit_runtime::__private::Duration::from_micros(60000000),) }), cost :
            ::core::option::Option::Some(1), file : ::core::file!(), line :
            ::core::line!(), }
        }
        let __ratelimit: &'static ::core::primitive::str = ::ratelimit_runtime::__private::named_scope(
            &__ratelimit,
            "login",
        );
        let __ratelimit = (
            __ratelimit,
            ::core::option::Option::Some(
                ::ratelimit_runtime::__private::scoped_key(__ratelimit, &(user_id)),
            ),
        );
        if let ::core::result::Result::Err(__ratelimit) = ::ratelimit_runtime::__private::check(
                ::ratelimit_runtime::__private::global(),
                __ratelimit,
                const {
                    ::ratelimit_runtime::Rate::new_const(
                        5,
                        ::ratelimit_runtime::__private::Duration::from_micros(60000000),
                    )
                },
            )
            .await
        {
            return ::ratelimit_runtime::__private::denied(__ratelimit);
        }
    }
    { check_password(user_id, password).await }
}
